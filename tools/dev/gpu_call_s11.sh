#!/usr/bin/env bash
# Session 11's device calls: gpu_call_s8.sh with the same switches (NCU_DETAIL among them).
exec "$(dirname "$0")/gpu_call_s8.sh" "$@"
