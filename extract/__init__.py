"""What happens to frames. Rooms, lowest first: keypoints/ (frames to keypoints), sources/ (where
a video's frames come from), corpora/ (which videos a corpus lists), outputs/ (tensors and
exports), inspect/ (report and pictures); sample.py writes the embedded demo dataset. A room
imports only the rooms its __init__ names; extract/ never imports jobs/ (tests/test_codebase.py).

The public face, for a notebook's one clip and for code that reads a run's outputs
(docs/python.md), is the package's: `from phoenix_keypoints import extract_keypoints, load_split,
as_fixed_size, changed_frames` (phoenix_keypoints/__init__.py names where each lives).

- `extract_keypoints(source, estimator=DEFAULT_FAMILY, fps=None, **options)`: one video file, folder
  of frames, list of images or RGB array to keypoints in this process, the numbers a run gives
  (extract.clip)
- `load_split(run_dir, split, tag=None)`: a tensor set's split, memory-mapped (extract.outputs.loader)
- `as_fixed_size(column, width)`: a landmark column as fixed-size lists (extract.keypoints.schema)
- `changed_frames(root, recorded, content=False)`: frames on disk no longer what their rows were
  made from (extract.sources.provenance)
"""
