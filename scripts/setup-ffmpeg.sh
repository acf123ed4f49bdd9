#!/usr/bin/env bash
# Installs Debian's ffmpeg package (ffmpeg and ffprobe) for `visionserve video` and its tests,
# only when ffmpeg is missing (scripts/apt-install.sh). Exits 0 when ffmpeg and ffprobe are present
# afterwards, 1 otherwise (the tests then skip with the reason).
exec bash "$(dirname "$0")/apt-install.sh" setup-ffmpeg ffmpeg ffmpeg ffprobe
