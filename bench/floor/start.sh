# Sourced by bench/cold.sh and bench/floor-costs.sh: `floor_start DIR` compiles bench/floor/floor-relay.c into DIR,
# starts it on a free 127.0.0.1 port and waits until it accepts (else says so and returns 1); sets floor_pid and
# floor_port. The caller stops it by floor_pid (its EXIT trap). Run from the repository's root.
floor_start() {
    cc -O2 -o "$1/floor-relay" bench/floor/floor-relay.c
    floor_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$1/floor-relay" "$floor_port" >"$1/floor.log" 2>&1 &
    floor_pid=$!
    for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$floor_port") 2>/dev/null && return 0; sleep 0.1; done
    echo "$0: the floor relay did not accept on 127.0.0.1:$floor_port within 5 s ($1/floor.log):" >&2
    tail -3 "$1/floor.log" >&2
    return 1
}
