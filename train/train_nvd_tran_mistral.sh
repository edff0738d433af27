#!/usr/bin/env bash
exec "$(dirname "${BASH_SOURCE[0]}")/launch/launch.sh" nvd tran mistral "$@"
