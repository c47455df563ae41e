"""`python -m phoenix_keypoints ...` is the `phoenix-keypoints` command."""

from phoenix_keypoints.jobs.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
