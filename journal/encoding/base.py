"""What every encoder is: the Encoder protocol, how an encoder describes itself, and the text an entry is embedded from.

An encoder turns texts into unit-length float32 vectors and tags them with its
identity (:class:`~journal.encoding.EncoderIdentity`); the index stores
vectors under that tag and ranks only those of the encoder in use. The
implementations, one module each, are listed in :mod:`journal.encoding`.
Nothing here imports NumPy: the protocol names its types for type checkers only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from journal.encoding._identity import EncoderIdentity

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Encoder", "describe", "document_text"]


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit-length float32 vectors.

    ``identity`` is the tag every vector it makes is stored under: two
    encoders with the same identity must give the same vectors. Vectors
    stored under another identity are never ranked; the journal embeds those
    entries again. The encoders here give :attr:`EncoderIdentity.key`
    (model, dimension, normalisation, hash of the model files) and describe
    themselves in full with ``describe()``, which the index records.
    """

    @property
    def identity(self) -> str:
        """The vectors' tag, e.g. ``"<model>:<dimension>:l2:sha256:<hash>"``."""
        ...

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return an array of shape ``(len(texts), dimension)``, each row L2-normalised."""
        ...


def describe(encoder: Encoder) -> dict[str, Any]:
    """*encoder*'s identity as JSON data: its ``describe()`` when it has one, else its identity and its class.

    The key is always the encoder's :attr:`Encoder.identity`, the tag its vectors are stored under.
    """
    described = getattr(encoder, "describe", None)
    found = described() if callable(described) else None
    if isinstance(found, EncoderIdentity) and found.key == encoder.identity:
        return found.to_dict()
    return {"key": encoder.identity, "implementation": type(encoder).__name__}


def document_text(theme: str, tags: Sequence[str], focus: str | None, voice: str) -> str:
    """The text an entry is embedded from: its labels first, then its prose.

    The model reads at most 256 word pieces, so the short, dense labels go
    before the voice, which is cut when long.
    """
    head = [part for part in (theme, " ".join(tags), focus or "") if part]
    return ". ".join([*head, voice])
