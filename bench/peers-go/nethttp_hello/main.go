// Go net/http hello (GOMAXPROCS = the number of cores), with the routes every HTTP peer serves:
// `/` → Hello, World!, `/cpu?us=N` (N µs of CPU in the handler's goroutine) and `/sleep?ms=N` (a
// timer wait, which parks the goroutine). Usage: nethttp_hello PORT.
package main

import (
	"log"
	"net/http"
	"os"
	"strconv"
	"time"
)

func number(r *http.Request, name string, fallback int64) int64 {
	if n, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64); err == nil {
		return n
	}
	return fallback
}

func reply(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte(body))
}

func main() {
	port := "8080"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) { reply(w, "Hello, World!") })
	mux.HandleFunc("/cpu", func(w http.ResponseWriter, r *http.Request) {
		until := time.Now().Add(time.Duration(number(r, "us", 100)) * time.Microsecond)
		x := uint64(0)
		for time.Now().Before(until) {
			x = x*6364136223846793005 + 1
		}
		_ = x
		reply(w, "done")
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(number(r, "ms", 10)) * time.Millisecond)
		reply(w, "slept")
	})
	log.Printf("go net/http listening on 127.0.0.1:%s", port)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, mux))
}
