"""COCO-WholeBody 133 points from the user's ONNX detector and pose model (rtmlib's)."""
