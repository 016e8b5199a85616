"""Model backends: the only modules that load model runtimes.

* :mod:`.model_files`: where model files live, how they are fetched and verified (the manifest is package data);
* :mod:`.encoder`: the :class:`~.encoder.Encoder` ABC and :class:`~.encoder.OnnxEncoder` (the only importer of
  onnxruntime);
* :mod:`.llama`: the shared llama.cpp runtime (the only importer of llama_cpp).

Nothing heavy is imported here: ``import memrefine_edge.backends`` stays fast.
"""
