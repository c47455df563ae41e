"""Looking at what was extracted: the quality report and its figures, plots and page (templates/),
drawings of keypoints on frames, one video as MP4/GIF/PNG, and the comparison of two runs.

May import: extract.outputs, extract.keypoints, extract.sources.
"""
