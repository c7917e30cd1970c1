// gobwas/ws echo at its low level (as its README shows for speed): a raw listener, ws.Upgrade, a
// goroutine per connection reading frame headers through a 4 KiB bufio.Reader, unmasking in
// place, and writing each echo as header + payload in one writev. Frames are echoed as they come
// (fragments too); pings get pongs, a close is echoed. Usage: gobwas_echo PORT.
package main

import (
	"bufio"
	"io"
	"log"
	"net"
	"os"

	"github.com/gobwas/ws"
)

type headerBuf struct{ b []byte }

func (h *headerBuf) Write(p []byte) (int, error) { h.b = append(h.b, p...); return len(p), nil }

func echo(conn net.Conn) {
	defer conn.Close()
	if _, err := ws.Upgrade(conn); err != nil {
		return
	}
	r := bufio.NewReaderSize(conn, 4096)
	var payload []byte
	head := &headerBuf{make([]byte, 0, ws.MaxHeaderSize)}
	for {
		h, err := ws.ReadHeader(r)
		if err != nil {
			return
		}
		if int64(cap(payload)) < h.Length {
			payload = make([]byte, h.Length)
		}
		p := payload[:h.Length]
		if _, err := io.ReadFull(r, p); err != nil {
			return
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
			h.Masked = false
		}
		switch h.OpCode {
		case ws.OpClose:
			ws.WriteFrame(conn, ws.NewCloseFrame(p))
			return
		case ws.OpPing:
			h.OpCode = ws.OpPong
		case ws.OpPong:
			continue
		}
		head.b = head.b[:0]
		if err := ws.WriteHeader(head, h); err != nil {
			return
		}
		frame := net.Buffers{head.b, p}
		if _, err := frame.WriteTo(conn); err != nil {
			return
		}
	}
}

func main() {
	port := "9005"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("gobwas/ws echo on 127.0.0.1:%s", port)
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go echo(c)
	}
}
