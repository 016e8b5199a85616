"""Evaluation: the LoCoMo harness, the QA metric, reports. Not needed at run time.

* :mod:`.harness`: import, compress with each method, retrieve, score;
* :mod:`.questions`: reading LoCoMo files and questions; :mod:`.answerer`: the QA answer model;
* :mod:`.context`: what fits a reader's context, answer presence; :mod:`.floors`: fifo and random;
* :mod:`.metrics`: a reimplementation of the official LoCoMo QA scorer (checked against its vectors);
* :mod:`.stemmer`: the Porter stemmer the scorer needs;
* :mod:`.report`: JSON and markdown reports, machine facts.
"""
