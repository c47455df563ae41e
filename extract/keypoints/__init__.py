"""Frames to keypoints: the room every other one builds on.

What a frame is once read (a frame file's bytes decoded to 8-bit RGB, or the status saying why
not: frames.py), what a keypoint family declares (declaration.py), the class a family is
(contract.py: `Family`, the whole contract with its defaults) and the registry that makes a
family's one instance by name (estimator.py; the families live in extract/families/, or in
installed plugins), one video's frames through the
family's estimator into column blocks (video_rows.py), the keypoint table's schema and Parquet
encoding (schema.py), point sets read in a family's numbering (points.py: presets, --points
lists, point names; the numbering itself is data in the family's package), keypoints.parquet's own
metadata
(filemeta.py), the environment every process of the tool hands on (environ.py: no search
path reaching the current folder, onnxruntime's telemetry off), what a user's ONNX file may open
and do before it runs (onnx_files.py, onnx_graph.py), every call of such a model bounded in time
and memory (model_calls.py), the numbers every option reads (option_values.py), and how messages
say a name they did not choose (words.py: "an openpose25 run").

May import: nothing of this project.
"""
