"""What a merged run becomes for training and for existing code: tensor sets and their loader,
normalisation and gap filling, and the exports (pkl dict, .pose, Kaggle islr, the older pipeline's
pkl and npz).

May import: extract.keypoints, extract.sources.
"""
