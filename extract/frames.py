"""Read one frame into the 8-bit RGB array MediaPipe wants, or say why it cannot be.

Choices (documented in the README's bad-input table):
- 0-byte file, not a PNG (by its signature), or undecodable: not processed; status says which.
- 16-bit: scaled to 8 bit (>> 8); grayscale: replicated to RGB; RGBA: alpha dropped. These are
  processed and the row's `note` says what was converted.
- another size than the video's first frame: processed as it is (MediaPipe's x, y are normalised by
  the frame's own width and height, which the row records) and noted.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

STATUS_EMPTY = "empty_file"
STATUS_NOT_PNG = "not_png"
STATUS_UNREADABLE = "unreadable"
STATUS_CORRUPT = "corrupt_png"


def read_frame(path: Path) -> tuple[np.ndarray | None, str, str]:
    """(rgb uint8 [H, W, 3] or None, status, note). status is "ok" when the array is usable."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return None, STATUS_UNREADABLE, e.strerror or type(e).__name__
    if not data:
        return None, STATUS_EMPTY, ""
    if not data.startswith(PNG_SIGNATURE):
        return None, STATUS_NOT_PNG, ""
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if img is None or img.size == 0:
        return None, STATUS_CORRUPT, ""
    notes = []
    if img.dtype == np.uint16:
        img = (img >> 8).astype(np.uint8)
        notes.append("16-bit to 8-bit")
    elif img.dtype != np.uint8:
        return None, STATUS_CORRUPT, f"unsupported sample type {img.dtype}"
    if img.ndim == 2 or img.shape[2] == 1:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        notes.append("grayscale to RGB")
    elif img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
        notes.append("alpha dropped")
    else:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return img, "ok", "; ".join(notes)
