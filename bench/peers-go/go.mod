// The Go peers the benchmarks compare twinhttp against: net/http hello, and WebSocket echo on
// gorilla/websocket and gobwas/ws. Built by bench/peers/build.sh into bin/.
module twinhttp/bench/peers-go

go 1.26

require (
	github.com/gobwas/ws v1.5.0
	github.com/gorilla/websocket v1.5.3
)

require github.com/gobwas/httphead v0.1.0 // indirect
