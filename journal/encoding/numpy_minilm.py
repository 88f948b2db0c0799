"""all-MiniLM-L6-v2 in NumPy: the packaged default model without torch.

A BERT encoder forward pass (word pieces from the ``tokenizers`` library,
weights memory-mapped from ``model.safetensors``), mean pooling over the real
tokens and L2 normalisation, as sentence-transformers computes it for this
model. Starting it costs the NumPy and tokenizers imports and mapping 90 MB of
weights, about a tenth of a second, where importing torch takes seconds.

Nothing heavy is imported at module level: NumPy and the libraries load when
a :class:`MiniLMEncoder` is built.

Threads: one encoder may be called from several threads at once. The weights
and the tokenizer's settings are fixed when it is built and only read
afterwards (the tokenizer is never reconfigured, so its Rust side is only
borrowed shared); every call keeps its arrays in local variables. NumPy's
matrix products release the GIL, so calls overlap, though on two cores four
concurrent encodes took longer than the same four one after another.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from journal.encoding._blas import one_blas_thread
from journal.encoding._identity import EncoderIdentity, model_files, weights_hash

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float32]

__all__ = ["MiniLMEncoder", "gelu", "mean_pooled"]

#: Word pieces per forward pass (batch size x padded length): bounds the
#: attention scores (12 heads x length^2 per text) to tens of megabytes.
_BATCH_TOKENS: Final = 4096
#: The most of a forward pass's word pieces that may be padding. Every layer
#: computes a padded piece as it does a real one, so a batch cut by size alone
#: spent half its work on padding when it held a few short texts and one long
#: one (32 journal-shaped texts); a bucket this tight still gathers many texts
#: of about one length into one pass, whose products run faster than one a text.
_PADDING_SHARE: Final = 0.125
# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0: Chebyshev fit with a
# relative error under 1.2e-7 for every z (Numerical Recipes' erfcc), P's
# coefficients from the highest power down. A relative error in the tail is
# what keeps x * Phi(x) exact for large negative x, where 1 + erf(x) cancels.
_ERFC_COEFFICIENTS: Final = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
)


class _GeluScratch:
    """Three float32 work buffers of *size* elements for :func:`_gelu_in_place`, taken once per forward pass."""

    def __init__(self, size: int) -> None:
        import numpy as np

        self.buffers = [np.empty(size, dtype=np.float32) for _ in range(3)]


def gelu(x: Array) -> Array:
    """BERT's ``gelu``: ``x * Phi(x)`` with the exact (erf) normal CDF, in float32."""
    import numpy as np

    result: Array = np.array(x, dtype=np.float32, order="C")
    _gelu_in_place(result, _GeluScratch(result.size))
    return result


def _gelu_in_place(x: Array, scratch: _GeluScratch) -> None:
    """*x* (C-contiguous float32) replaced by ``x * Phi(x)``, in elementwise passes that need no gather.

    With ``p = Phi(-|x|) = erfc(|x| / sqrt 2) / 2``: ``x Phi(x)`` is ``x p``
    for negative x and ``x - x p`` otherwise, that is ``max(x, 0) - |x p|``.
    (A tabulated Phi needed four gathers per element, which took most of its time.)
    """
    import numpy as np

    flat = x.reshape(-1)
    z, t, p = (buffer[: flat.size] for buffer in scratch.buffers)
    np.abs(flat, out=z)
    z *= np.float32(1.0 / math.sqrt(2.0))
    np.multiply(z, np.float32(0.5), out=t)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    first, *middle, last = (np.float32(c) for c in _ERFC_COEFFICIENTS)
    np.multiply(t, first, out=p)
    for coefficient in middle:
        p += coefficient
        p *= t
    p += last
    z *= z
    p -= z
    np.exp(p, out=p)
    p *= t
    p *= np.float32(0.5)  # Phi(-|x|)
    p *= flat
    np.abs(p, out=p)
    np.maximum(flat, np.float32(0.0), out=flat)
    flat -= p


class _Layer:
    """One transformer block's weights, arranged for ``x @ W`` products."""

    def __init__(self, weights: dict[str, Any], prefix: str) -> None:
        import numpy as np

        def linear(name: str) -> tuple[Array, Array]:
            return weights[f"{prefix}{name}.weight"].T, weights[f"{prefix}{name}.bias"]

        parts = [linear(f"attention.self.{part}") for part in ("query", "key", "value")]
        # Query, key and value in one product.
        self.qkv = np.ascontiguousarray(np.concatenate([w for w, _ in parts], axis=1))
        self.qkv_bias = np.concatenate([b for _, b in parts])
        self.attention_out, self.attention_out_bias = linear("attention.output.dense")
        self.attention_norm = weights[f"{prefix}attention.output.LayerNorm.weight"], weights[f"{prefix}attention.output.LayerNorm.bias"]
        self.intermediate, self.intermediate_bias = linear("intermediate.dense")
        self.output, self.output_bias = linear("output.dense")
        self.output_norm = weights[f"{prefix}output.LayerNorm.weight"], weights[f"{prefix}output.LayerNorm.bias"]


class MiniLMEncoder:
    """An :class:`~journal.encoding.base.Encoder` computing a BERT sentence-transformers model in NumPy.

    Args:
        path: the model directory (``config.json``, ``model.safetensors``,
            ``tokenizer.json``, ``sentence_bert_config.json``, ``1_Pooling/``).
        name: the model name its vectors are tagged with.
        cache_dir: where the hash of the model files is remembered (see
            :class:`journal.encoding.sentence_transformers_encoder.SentenceTransformerEncoder`).

    Raises:
        ValueError: the directory holds a model this forward pass does not
            compute (another architecture, activation or pooling).
    """

    #: What every encode runs under: NumPy's products on one BLAS thread.
    _guard: contextlib.AbstractContextManager[object] = one_blas_thread
    #: What computes the vectors, as :meth:`describe` names it.
    implementation = "numpy"

    def __init__(self, path: Path, name: str, *, cache_dir: Path | None = None) -> None:
        from tokenizers import Tokenizer

        config = _read_json(path / "config.json")
        pooling = _read_json(path / "1_Pooling" / "config.json")
        unsupported = {
            "model_type": config.get("model_type") != "bert",
            "hidden_act": config.get("hidden_act") != "gelu",
            "position_embedding_type": config.get("position_embedding_type", "absolute") != "absolute",
            "pooling": not pooling.get("pooling_mode_mean_tokens")
            or any(value for key, value in pooling.items() if key.startswith("pooling_mode_") and key != "pooling_mode_mean_tokens"),
        }
        if any(unsupported.values()):
            raise ValueError(f"{path}: not a mean-pooled BERT with gelu ({', '.join(k for k, bad in unsupported.items() if bad)})")
        self.heads = int(config["num_attention_heads"])
        self.epsilon = float(config["layer_norm_eps"])
        # sentence-transformers truncates to max_seq_length word pieces, the
        # special tokens included, not to tokenizer.json's own setting.
        limit = int(_read_json(path / "sentence_bert_config.json")["max_seq_length"])
        self.max_tokens = min(limit, int(config["max_position_embeddings"]))

        weights = {key.removeprefix("bert."): value for key, value in _map_safetensors(path / "model.safetensors").items()}
        self.word_embeddings = weights["embeddings.word_embeddings.weight"]
        self.position_embeddings = weights["embeddings.position_embeddings.weight"]
        self.token_type_embedding = weights["embeddings.token_type_embeddings.weight"][0]
        self.embedding_norm = weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"]
        self.layers = [_Layer(weights, f"encoder.layer.{number}.") for number in range(int(config["num_hidden_layers"]))]
        self.dimension = int(config["hidden_size"])

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.no_padding()  # each batch is padded here, to its own longest text
        tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer = tokenizer  # configured once: calls only read it
        self.name = name
        self.path = path
        # The files hashed are those sentence-transformers' encoder hashes for the same directory.
        files_hash = weights_hash(path, model_files(path), cache_dir=cache_dir)
        self._described = EncoderIdentity(name, self.dimension, files_hash, implementation=self.implementation)
        self._identity = self._described.key

    @property
    def identity(self) -> str:
        """The vectors' tag, the same as sentence-transformers gives this model (see :attr:`journal.encoding.EncoderIdentity.key`)."""
        return self._identity

    def describe(self) -> EncoderIdentity:
        """The model, dimension, normalisation, weights hash and implementation."""
        return self._described

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed *texts* as unit-length float32 rows.

        Texts are sorted by length and encoded in buckets of about one length
        (see :func:`_batches`), each padded only to its own longest text; the
        rows come back in the order of *texts*. Padding is masked out of
        attention and pooling, so a text's vector does not depend on its bucket.
        """
        import numpy as np

        # sentence-transformers strips each text before tokenizing.
        encodings = self._tokenizer.encode_batch([text.strip() for text in texts])
        ids = [encoding.ids for encoding in encodings]
        result = np.empty((len(ids), self.dimension), dtype=np.float32)
        with self._guard:
            self._fill(result, ids)
        return result

    def _fill(self, result: Array, ids: Sequence[Sequence[int]]) -> None:
        """Write the vector of each ``ids[i]`` into ``result[i]``."""
        import numpy as np

        for batch in _batches(ids):
            width = len(ids[batch[-1]])
            tokens = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.float32)
            for row, i in enumerate(batch):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            result[batch] = self._forward(tokens, mask)

    def _forward(self, tokens: npt.NDArray[np.int64], mask: Array) -> Array:
        """Pooled, normalised vectors of one padded batch.

        Every product and elementwise step writes into buffers taken once per
        call and reused by all six layers: fresh arrays of this size came from
        new pages each time (about a thousand page faults per one-text encode),
        and faulting them in cost a tenth of its time. The batch's texts are
        rows of one matrix, so each linear layer is one product.
        """
        import numpy as np

        batch, width = tokens.shape
        rows, dimension = batch * width, self.dimension
        heads, size = self.heads, dimension // self.heads
        hidden = self._embedded(tokens).reshape(rows, dimension)
        scratch = np.empty((rows, 1), dtype=np.float32)
        square = np.empty((rows, dimension), dtype=np.float32)
        self._norm_in_place(hidden, self.embedding_norm, square, scratch)
        # Padded keys get the lowest float32 score: softmax gives them exactly 0.
        key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(size))
        qkv = np.empty((rows, 3 * dimension), dtype=np.float32)
        scores = np.empty((batch, heads, width, width), dtype=np.float32)
        row_scratch = np.empty((batch, heads, width, 1), dtype=np.float32)
        attended = np.empty((batch, heads, width, size), dtype=np.float32)
        context = np.empty((rows, dimension), dtype=np.float32)
        projected = np.empty((rows, dimension), dtype=np.float32)
        inner = np.empty((rows, self.layers[0].intermediate.shape[1]), dtype=np.float32)
        gelu_scratch = _GeluScratch(inner.size)
        for layer in self.layers:
            np.matmul(hidden, layer.qkv, out=qkv)
            qkv += layer.qkv_bias
            split = qkv.reshape(batch, width, 3, heads, size).transpose(2, 0, 3, 1, 4)
            query, key, value = split[0], split[1], split[2]
            np.matmul(query, key.transpose(0, 1, 3, 2), out=scores)
            scores *= scale
            scores += key_bias
            np.subtract(scores, scores.max(axis=-1, keepdims=True, out=row_scratch), out=scores)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True, out=row_scratch)
            np.matmul(scores, value, out=attended)
            context.reshape(batch, width, heads, size)[...] = attended.transpose(0, 2, 1, 3)
            np.matmul(context, layer.attention_out, out=projected)
            np.add(hidden, projected, out=hidden)
            hidden += layer.attention_out_bias
            self._norm_in_place(hidden, layer.attention_norm, square, scratch)
            np.matmul(hidden, layer.intermediate, out=inner)
            inner += layer.intermediate_bias
            _gelu_in_place(inner, gelu_scratch)
            np.matmul(inner, layer.output, out=projected)
            np.add(hidden, projected, out=hidden)
            hidden += layer.output_bias
            self._norm_in_place(hidden, layer.output_norm, square, scratch)
        return mean_pooled(hidden.reshape(batch, width, dimension), mask)

    def _embedded(self, tokens: npt.NDArray[np.int64]) -> Array:
        """The (texts, width, dimension) sums of each word piece's row, its position's and the one token type's, before the first LayerNorm."""
        batch, width = tokens.shape
        embedded: Array = self.word_embeddings[tokens.reshape(-1)].reshape(batch, width, self.dimension)
        embedded += self.position_embeddings[:width]
        embedded += self.token_type_embedding
        return embedded

    def _norm_in_place(self, x: Array, weight_bias: tuple[Array, Array], square: Array, scratch: Array) -> None:
        """LayerNorm of the rows of *x*, written over *x*; *square* and *scratch* are work space of its shape and of one column."""
        import numpy as np

        weight, bias = weight_bias
        # np.add.reduce and a division are what ndarray.mean computes, without its Python wrapper.
        columns = np.float32(x.shape[-1])
        np.add.reduce(x, axis=-1, keepdims=True, out=scratch)
        scratch /= columns
        x -= scratch
        np.multiply(x, x, out=square)
        np.add.reduce(square, axis=-1, keepdims=True, out=scratch)
        scratch /= columns
        scratch += np.float32(self.epsilon)
        np.sqrt(scratch, out=scratch)
        x /= scratch
        x *= weight
        x += bias

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, path={str(self.path)!r})"


def mean_pooled(hidden: Array, mask: Array) -> Array:
    """The unit-length mean of each text's real tokens: *hidden* is (texts, width, dimension), *mask* 1 for real tokens, 0 for padding."""
    import numpy as np

    summed = (hidden * mask[:, :, None]).sum(axis=1)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
    vectors: Array = (pooled / norms).astype(np.float32, copy=False)
    return vectors


def _batches(ids: Sequence[Sequence[int]]) -> Iterator[list[int]]:
    """Indices of *ids* by ascending length, in buckets each padded to its own longest text.

    A bucket holds at most :data:`_BATCH_TOKENS` padded word pieces, at most
    :data:`_PADDING_SHARE` of them padding: the next longer text starts a new
    bucket when taking it would pass either bound.
    """
    batch: list[int] = []
    real = 0
    for i in sorted(range(len(ids)), key=lambda i: len(ids[i])):
        length = len(ids[i])
        padded = (len(batch) + 1) * length
        if batch and (padded > _BATCH_TOKENS or padded - real - length > _PADDING_SHARE * padded):
            yield batch
            batch, real = [], 0
        batch.append(i)
        real += length
    if batch:
        yield batch


_SAFETENSORS_DTYPES: Final = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def _map_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file as read-only arrays over one memory map.

    safetensors' own NumPy loader reads the whole file and then copies it
    into arrays, a peak of twice its 90 MB. Mapped, only the pages a forward
    pass touches count (for a query, the layers and a few embedding rows),
    and they are the page cache's, shared by every process using the model.
    """
    import mmap

    import numpy as np

    with path.open("rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    buffer = np.frombuffer(mapped, dtype=np.uint8)
    header_size = int(buffer[:8].view("<u8")[0])
    header = json.loads(bytes(buffer[8 : 8 + header_size]))
    data = buffer[8 + header_size :]
    tensors: dict[str, Any] = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec["dtype"] not in _SAFETENSORS_DTYPES:
            continue
        begin, end = spec["data_offsets"]
        dtype = np.dtype(_SAFETENSORS_DTYPES[spec["dtype"]])
        if not 0 <= begin <= end <= len(data) or end - begin != math.prod(spec["shape"]) * dtype.itemsize:
            raise ValueError(f"{path}: tensor {name!r} lies outside the file or does not match its shape")
        tensors[name] = data[begin:end].view(dtype).reshape(spec["shape"])
    return tensors


def _read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TypeError(f"{path}: not a JSON object")
    return data
