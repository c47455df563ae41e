"""Keypoint families, one package each: a family's declaration (what its points are and what
every output needs to know of them), its runner (frames to points) and any output it alone has.
Lower rooms never import a family: they ask the registry (extract.keypoints.estimator.family),
which imports a family's package only when a run, file or clip names it.

May import: extract.inspect, extract.outputs, extract.corpora, extract.sources, extract.keypoints.
"""
