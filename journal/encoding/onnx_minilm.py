"""all-MiniLM-L6-v2 on ONNX Runtime: the NumPy encoder's model, its forward pass in fused CPU kernels.

The weights, tokenizer, embedding sums and pooling are
:class:`~journal.encoding.numpy_minilm.MiniLMEncoder`'s; only the six transformer
layers (and the LayerNorm before them) run elsewhere. The graph is built here from
the same arrays (no ``.onnx`` file ships with the model, and none is written):
ONNX Runtime's contrib operators ``Attention`` (the query, key and value
product, the masked softmax and the heads in one kernel), ``SkipLayerNormalization``
(residual, bias and LayerNorm) and ``BiasGelu`` (the exact erf GELU). A text
takes a half (short) to three quarters (long) of the CPU time it takes in
NumPy, and its vector agrees with sentence-transformers' to a cosine of
0.9999 or more, like the NumPy one.

Threads: the session computes on the calling thread alone (one intra-op
thread, no pool) until the encoder is widened, so a query of a process that
never widens never wakes a second core. Bulk embedding gets
both cores as NumPy's does, by encoding two chunks on two threads at once
(ONNX Runtime's ``run`` may be called from several threads), or, where one
text at a time is embedded behind a simulation's runs, through
:meth:`OnnxMiniLMEncoder.widened`, a session of two threads. An encoder holds
one session at a time: a session keeps weights of its own (its packed copy of
each product's matrix, about 55 MB), so the widened session, once built,
replaces the one-thread session for every copy of the encoder, queries
included, rather than sitting beside it. The weights are handed to the
session as they are, never written into the model's bytes: the products'
matrices as the mapped file holds them (a row per output, multiplied
transposed), so the session's packed copy is the only one in the process's
own memory (only the query, key and value matrices are joined into one
array, about 10 MB, as ``Attention`` takes them).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.encoding._onnxgraph import FLOAT, INT32, OnnxGraph
from journal.encoding.numpy_minilm import MiniLMEncoder, mean_pooled

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float32]

__all__ = ["OnnxMiniLMEncoder"]

_CONTRIB: Final = "com.microsoft"


class OnnxMiniLMEncoder(MiniLMEncoder):
    """A :class:`MiniLMEncoder` whose forward pass runs on ONNX Runtime (the ``onnx`` extra).

    Args: as :class:`MiniLMEncoder`'s.

    Raises:
        ImportError: ``onnxruntime`` cannot be imported.
        ValueError: as :class:`MiniLMEncoder`'s.
    """

    # ONNX Runtime does not use NumPy's BLAS: an encode has nothing to hold to one thread.
    _guard: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    implementation = "onnxruntime"

    def __init__(self, path: Path, name: str, *, cache_dir: Path | None = None) -> None:
        import onnxruntime

        super().__init__(path, name, cache_dir=cache_dir)
        self._runtime = onnxruntime
        graph, weights = self._graph()
        self._model = graph.model("minilm")
        # The sessions keep pointers into these values: they live as long as the encoder.
        self._weights = {key: onnxruntime.OrtValue.ortvalue_from_numpy(value) for key, value in weights.items()}
        # The one session, as [intra-op threads, session]: a list, so that the widened copies share it.
        self._shared: list[Any] = [0, None]
        self._sessions_lock = threading.Lock()
        self._threads = 1
        self._session()  # now: a runtime that cannot run the graph fails the load, not the first query

    def widened(self, threads: int) -> OnnxMiniLMEncoder:
        """This encoder with each forward pass spread over *threads* threads, for bulk embedding one text at a time.

        The vectors are the same bit for bit (the runtime splits the products'
        rows and the heads, never a sum; a test compares them). The wider
        session is built at its first encode and from then on serves this
        encoder and every copy of it, queries too: two sessions would hold
        two packed copies of the weights. A process that never widens (a
        command, a server of queries) keeps its one-thread session, so its
        queries never wake a second core.
        """
        wide = copy.copy(self)
        wide._threads = max(1, threads)
        return wide

    def _session(self) -> Any:
        """The encoder's session: built at the first use, and again, wider, at the first use of a wider copy.

        A call already running on the narrower session keeps it until it returns; then it is freed.
        """
        with self._sessions_lock:
            threads, session = self._shared
            if threads < self._threads:
                # Let go of the narrower session first: its memory (freed once no call runs on it) is
                # what the wider one is then built in, so the process never holds both.
                self._shared[:] = [0, None]
                session = None
                options = self._runtime.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                options.log_severity_level = 3  # warnings about unused optimisations are not the user's business
                # Between two texts the wider session's threads sleep rather than spin: a simulated year took as
                # long either way, and a spinning thread takes the core from the run that wants it.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                options.add_external_initializers(list(self._weights), list(self._weights.values()))
                session = self._runtime.InferenceSession(self._model, options, providers=["CPUExecutionProvider"])
                self._shared[:] = [self._threads, session]
            return session

    def _graph(self) -> tuple[OnnxGraph, dict[str, Array]]:
        """The forward pass as a graph over named weights (the arrays, made contiguous)."""
        import numpy as np

        graph = OnnxGraph([("", 17), (_CONTRIB, 1)])
        weights: dict[str, Array] = {}

        def weight(name: str, value: Array) -> str:
            # The file's float32 arrays are contiguous already: this copies nothing of the mapped weights.
            weights[name] = np.ascontiguousarray(value, dtype=np.float32)
            return graph.external(name, FLOAT, weights[name].shape)

        def product(x: str, rows: str) -> str:
            """x @ W.T, for W as the file holds it (a row per output): the session packs it, and no one else copies it."""
            return graph.node("FusedMatMul", [x, rows], domain=_CONTRIB, transB=1, alpha=1.0)

        # The embedding rows are summed in NumPy (see _forward): the session would copy the whole
        # 47 MB word table into memory of its own, where a text touches a few rows of the mapped file.
        hidden = graph.input("embedded", FLOAT, ["texts", "width", self.dimension])
        mask = graph.input("mask", INT32, ["texts", "width"])
        norm_weight, norm_bias = self.embedding_norm
        hidden = graph.node(
            "LayerNormalization",
            [hidden, weight("embedding_norm.weight", norm_weight), weight("embedding_norm.bias", norm_bias)],
            axis=-1,
            epsilon=self.epsilon,
        )
        for number, layer in enumerate(self.layers):

            def own(part: str, value: Array, number: int = number) -> str:
                return weight(f"layer{number}.{part}", value)

            attended = graph.node(
                "Attention", [hidden, own("qkv", layer.qkv), own("qkv_bias", layer.qkv_bias), mask], domain=_CONTRIB, num_heads=self.heads
            )
            projected = product(attended, own("attention_out", layer.attention_out.T))
            hidden = graph.node(
                "SkipLayerNormalization",
                [
                    projected,
                    hidden,
                    own("attention_norm.weight", layer.attention_norm[0]),
                    own("attention_norm.bias", layer.attention_norm[1]),
                    own("attention_out_bias", layer.attention_out_bias),
                ],
                domain=_CONTRIB,
                epsilon=self.epsilon,
            )
            inner = graph.node(
                "BiasGelu",
                [
                    product(hidden, own("intermediate", layer.intermediate.T)),
                    own("intermediate_bias", layer.intermediate_bias),
                ],
                domain=_CONTRIB,
            )
            projected = product(inner, own("output", layer.output.T))
            last = number == len(self.layers) - 1
            hidden = graph.node(
                "SkipLayerNormalization",
                [
                    projected,
                    hidden,
                    own("output_norm.weight", layer.output_norm[0]),
                    own("output_norm.bias", layer.output_norm[1]),
                    own("output_bias", layer.output_bias),
                ],
                domain=_CONTRIB,
                epsilon=self.epsilon,
                output="hidden" if last else None,
            )
        graph.output("hidden", FLOAT, ["texts", "width", self.dimension])
        return graph, weights

    def _forward(self, tokens: npt.NDArray[np.int64], mask: Array) -> Array:
        """Pooled, normalised vectors of one padded batch, the layers computed by the session."""
        import numpy as np

        hidden: Array = self._session().run(["hidden"], {"embedded": self._embedded(tokens), "mask": mask.astype(np.int32)})[0]
        return mean_pooled(hidden, mask)
