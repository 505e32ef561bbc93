# Sourced by the set-up scripts: `ticking CMD ARGS...` runs CMD and, while it runs, prints
# "  ... still installing (N s)" every $ARK_TICK_SECONDS seconds (15), so that `pip -q` is not minutes of
# silence; its exit status is CMD's.
ticking() {
  local start=$SECONDS every=${ARK_TICK_SECONDS:-15}
  "$@" &
  local pid=$!
  while ! wait_for "$pid" "$every"; do echo "  ... still installing ($((SECONDS - start)) s)"; done
  wait "$pid"
}
wait_for() {  # true once process $1 has ended, false after $2 seconds while it still runs
  local i
  for ((i = 0; i < $2; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
  ! kill -0 "$1" 2>/dev/null
}
