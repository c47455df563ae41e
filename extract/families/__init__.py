"""Keypoint families, one package each: a family's declaration (what its points are and what
every output needs to know of them), its runner (frames to points) and any output it alone has,
given as a subclass of `Family` (the whole contract, each member with its default:
docs/families.md). Lower rooms never import a family: they ask the registry
(extract.keypoints.estimator.family), which imports a family's package only when a run, file or
clip names it, and makes one instance of its class.

`Family` is re-exported here (from extract/keypoints/contract.py) for plugins and the guide:
`from phoenix_keypoints.extract.families import Family` imports no family.

May import: extract.inspect, extract.outputs, extract.corpora, extract.sources, extract.keypoints.
"""

from phoenix_keypoints.extract.keypoints.contract import Family

__all__ = ["Family"]
