"""`image distribute`: one squashfs image copied onto every node's local storage through Slurm (`nodes.py`), each
copy held to the image's record (image/)."""
