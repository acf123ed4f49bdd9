#!/usr/bin/env bash
# Installs Debian's rtsp-server-perl (a small RTSP server: sources publish with ANNOUNCE/RECORD,
# e.g. `ffmpeg -f rtsp rtsp://127.0.0.1:5545/name`, clients play rtsp://127.0.0.1:554/name over
# RTP/UDP) for the RTSP source test of `visionserve video`, only when it is missing
# (scripts/apt-install.sh). Exits 0 when it is present afterwards, 1 otherwise (the test skips).
exec bash "$(dirname "$0")/apt-install.sh" setup-rtsp-server rtsp-server-perl rtsp-server-perl
