"""The pipeline's stages, one module each (`python -m tasks.<stage>`); whoever runs one, no tool phones home."""

from wander.core.offline import stay_offline

stay_offline()
