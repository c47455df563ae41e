"""MediaPipe Holistic: the default family (543 points, 553 with a refined face)."""
