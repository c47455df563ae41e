"""What a merged run becomes for training and for existing code: tensor sets and their loader,
normalisation and gap filling, the one set of every declared point of a family without presets
(declared.py, and the .pose header made from a declaration), and the exports (pkl dict, .pose).
A family's own outputs (Kaggle's islr layout, the older pipeline's pkl) live in its package
(extract/families/).

May import: extract.keypoints, extract.sources.
"""
