"""The filesystem adapter: `S3Backend` (deepagents' backend protocol) over mounts of S3 prefixes."""

from s3skills.fs.backend import S3Backend
from s3skills.fs.mounts import Location, Mounts, RootDir, SkillsDir

__all__ = ["Location", "Mounts", "RootDir", "S3Backend", "SkillsDir"]
