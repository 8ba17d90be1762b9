#!/bin/sh
# SPDX-License-Identifier: MIT
# Generate ./configure from configure.ac (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
autoreconf --install --force --warnings=all
