"""The local LLM runtime: a lazily imported llama.cpp and one shared model per process.

llama-cpp-python is optional (the ``llm`` extra: ``pip install
'memrefine-edge[llm]'``): the default judge and merger load no GGUF model.
``llama_cpp`` is imported only when a model is first loaded, so importing
memrefine_edge (and ``memrefine --help``) stays fast and works without it; a
GGUF model asked for without it raises :class:`MissingExtraError`, naming the
extra, when its :class:`LlamaModel` is made, before any work.

One :class:`llama_cpp.Llama` is kept alive per ``(path, n_ctx, n_threads)``:
loading costs little, but the KV cache it holds is what makes repeated judge
calls cheap. Prompts are built so the fixed instructions come first; llama.cpp
then keeps their keys/values and only evaluates the part after the longest
common token prefix (restoring a saved KV state was slower than recomputing it;
the figures are in the docs' benchmarks page).

Defaults are for a small device shared with other work: ``n_threads=1``
(two threads ran several times slower than one while another process was
busy), temperature 0 and a fixed seed, ``verbose=False``.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memrefine_edge.core import MissingExtraError, ModelLoadError

if TYPE_CHECKING:  # pragma: no cover
    from llama_cpp import Llama

__all__ = [
    "LlamaModel",
    "Completion",
    "check_model_path",
    "require_llama_cpp",
    "LLM_EXTRA",
    "INSTALL_LLM",
    "DEFAULT_N_CTX",
    "DEFAULT_THREADS",
    "DEFAULT_SEED",
    "load_llama",
    "clear_cache",
    "chat_prompt",
    "tokenize",
    "eval_logits",
    "logprobs",
]

DEFAULT_N_CTX = 2048
DEFAULT_THREADS = 1
DEFAULT_SEED = 1234

_GGUF_MAGIC = b"GGUF"
_CACHE: dict[tuple[str, int, int], "Llama"] = {}
_LOCK = threading.Lock()


#: The package extra that installs llama-cpp-python, and the command that installs it.
LLM_EXTRA = "llm"
INSTALL_LLM = f"pip install 'memrefine-edge[{LLM_EXTRA}]'"


def _missing_llm(detail: str = "") -> MissingExtraError:
    return MissingExtraError(
        "a GGUF model (a GGUF judge, merger or answer model) needs llama-cpp-python, which is not installed: "
        f"{INSTALL_LLM} (the default judge and merger load no GGUF; `memrefine eval locomo --no-qa` needs none)"
        + (f" [{detail}]" if detail else ""),
        extra=LLM_EXTRA,
    )


def require_llama_cpp() -> None:
    """Check, without importing it, that llama-cpp-python is installed.

    :raises MissingExtraError: it is not (the ``llm`` extra installs it).
    """
    try:
        found = importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise _missing_llm()


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp  # noqa: PLC0415 - lazy on purpose
    except ImportError as exc:  # the llm extra is not installed (or its library does not load)
        raise _missing_llm(str(exc)) from exc
    return llama_cpp


def _check_gguf(path: Path) -> None:
    # llama.cpp reports a bad file on stderr and returns NULL; checking the
    # header first gives a clear message for the most common breakage.
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ModelLoadError(f"cannot read model file {path}: {exc}") from exc
    if head != _GGUF_MAGIC:
        raise ModelLoadError(f"{path} is not a GGUF file (header {head!r}); pass a .gguf model file")


def check_model_path(path: str | os.PathLike[str] | None) -> None:
    """Resolve an explicit GGUF path now, so a wrong one fails before any work, not at the first call.

    ``None`` is the bundled model: it is resolved and verified when it loads.
    :raises ModelNotFoundError: the file does not exist.
    """
    if path is not None:
        from ._model_files import model_path

        model_path("llm", path)


def load_llama(
    path: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int = DEFAULT_THREADS,
    seed: int = DEFAULT_SEED,
) -> "Llama":
    """The process-wide ``Llama`` for a GGUF file, loaded on first use.

    ``path=None`` is the bundled default model (resolved and verified through
    :func:`memrefine_edge.backends._model_files.model_path`). Any other GGUF works too.
    Raises :class:`ModelLoadError` when llama.cpp cannot load the file
    (truncated or corrupted GGUF, wrong format), never crashes the caller.
    """
    from ._model_files import model_path

    resolved = model_path("llm", path).resolve()
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    key = (str(resolved), int(n_ctx), int(n_threads))
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        _check_gguf(resolved)
        llama_cpp = _import_llama_cpp()
        try:
            llm = llama_cpp.Llama(
                model_path=str(resolved),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            from ._model_files import FETCH_COMMAND, manifest

            if path is None or Path(path).name == manifest()["llm"].file:
                fix = f"delete it and run `{FETCH_COMMAND}`, or pass another GGUF"
            else:  # the user's own file: fetching ours would not repair it
                fix = "check the file (a complete GGUF of a model llama.cpp supports), or pass another GGUF"
            raise ModelLoadError(
                f"llama.cpp could not load {resolved} ({exc}); the file is truncated, corrupted or not a "
                f"model this llama.cpp supports: {fix}"
            ) from exc
        _CACHE[key] = llm
        return llm


def clear_cache() -> None:
    """Drop every cached model (tests; freeing memory)."""
    with _LOCK:
        for llm in _CACHE.values():
            try:
                llm.close()
            except Exception:  # pragma: no cover - best effort
                pass
        _CACHE.clear()


# Free the models while the interpreter is whole: left to garbage collection at
# exit, llama-cpp-python's __del__ can run after its C bindings are torn down
# and print a TypeError traceback on every exit.
atexit.register(clear_cache)


_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def chat_prompt(llm: "Llama", messages: Sequence[dict[str, str]]) -> str:
    """Render messages with the GGUF's own chat template (ChatML if it has none).

    Formatting here rather than in ``create_chat_completion`` lets the judge
    score logits and control where the reusable prefix ends.
    """
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # lazy

    template = llm.metadata.get("tokenizer.chat_template") or _CHATML
    eos_id, bos_id = llm.token_eos(), llm.token_bos()
    eos = llm._model.token_get_text(eos_id) if eos_id >= 0 else ""
    bos = llm._model.token_get_text(bos_id) if bos_id >= 0 else ""
    fmt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
    chat: Any = list(messages)  # plain role/content dicts; llama-cpp-python types them as TypedDicts
    return fmt(messages=chat).prompt


def tokenize(llm: "Llama", text: str) -> list[int]:
    """Tokens of an already formatted prompt (special tokens parsed, BOS as the model wants)."""
    add_bos = str(llm.metadata.get("tokenizer.ggml.add_bos_token", "true")).lower() == "true"
    return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)


def eval_logits(llm: "Llama", tokens: Sequence[int], *, reuse_prefix: bool = True) -> np.ndarray:
    """Next-token logits after ``tokens`` (float32, length ``n_vocab``).

    With ``reuse_prefix`` only the tokens after the longest prefix shared
    with what the context already holds are evaluated.
    """
    tokens = list(tokens)
    if not tokens:
        raise ValueError("no tokens to evaluate")
    if len(tokens) > llm.n_ctx():
        raise ValueError(f"prompt is {len(tokens)} tokens; the context holds {llm.n_ctx()}")
    keep = 0
    if reuse_prefix and llm.n_tokens > 0:
        held = llm._input_ids
        limit = min(len(held), len(tokens) - 1)  # always evaluate >= 1 token to refresh logits
        while keep < limit and held[keep] == tokens[keep]:
            keep += 1
    llm.n_tokens = keep  # eval() drops the KV cells from n_tokens on
    llm.eval(tokens[keep:])
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    return np.array(logits, dtype=np.float32, copy=True)


def logprobs(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of a logit vector."""
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


# --- one model, as the judge, the merger and the answerer use it ------------------------------


@dataclass(frozen=True)
class Completion:
    """Generated text and the token counts behind it."""

    text: str
    prompt_tokens: int
    completion_tokens: int


class LlamaModel:
    """One GGUF model as a caller sees it: load, chat prompt, tokens, completion, next-token log-probs.

    The judge, the merger and the evaluation's answerer each hold one; the
    ``llama_cpp.Llama`` behind it is shared per process (:func:`load_llama`),
    and every use of llama-cpp-python's private attributes stays in this
    module. The runtime's presence and an explicit ``model_path`` are checked
    at construction (:class:`MissingExtraError` without the ``llm`` extra), so
    a wrong setup fails before any work; the model itself loads on first use or
    :meth:`load`.
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: int = DEFAULT_THREADS, seed: int = DEFAULT_SEED) -> None:
        check_model_path(model_path)
        require_llama_cpp()
        self.model_path = model_path
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self._grammars: dict[str, Any] = {}

    @property
    def name(self) -> str:
        """The model file's name (``default`` for the bundled model)."""
        return os.path.basename(str(self.model_path)) if self.model_path else "default"

    @property
    def llm(self) -> "Llama":
        """The shared ``llama_cpp.Llama`` (loaded on first use)."""
        return load_llama(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed)

    def load(self) -> None:
        """Load the model now (:class:`ModelLoadError` for a file llama.cpp cannot load)."""
        load_llama(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed)

    def chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt text for chat ``messages`` (the GGUF's own template)."""
        return chat_prompt(self.llm, messages)

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a formatted prompt."""
        return tokenize(self.llm, text)

    def complete(self, prompt: str | Sequence[int], *, max_tokens: int, stop: Sequence[str] = (),
                 schema: dict[str, Any] | None = None, fresh: bool = False) -> Completion:
        """Greedy completion (temperature 0, the model's seed).

        ``schema``: a JSON schema the output must follow (a grammar, built once
        per schema). ``fresh``: drop the KV cache first instead of reusing the
        shared prefix.
        """
        llm = self.llm
        if fresh:
            llm.reset()
        ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        kwargs: dict[str, Any] = {}
        if schema is not None:
            key = json.dumps(schema, sort_keys=True)
            if key not in self._grammars:
                from llama_cpp import LlamaGrammar  # lazy, like every llama_cpp import

                self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            kwargs["grammar"] = self._grammars[key]
        out: Any = llm.create_completion(ids, max_tokens=max_tokens, temperature=0.0, top_k=1, seed=self.seed,
                                    stop=list(stop), **kwargs)
        usage = out.get("usage", {}) if isinstance(out, dict) else {}
        return Completion(text=str(out["choices"][0]["text"]), prompt_tokens=len(ids),
                          completion_tokens=int(usage.get("completion_tokens", 0)))

    def next_token_logprobs(self, tokens: Sequence[int], *, reuse_prefix: bool = True) -> np.ndarray:
        """Log-probabilities of the next token after ``tokens``."""
        return logprobs(eval_logits(self.llm, tokens, reuse_prefix=reuse_prefix))
