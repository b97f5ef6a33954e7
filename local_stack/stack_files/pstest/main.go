package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"cloud.google.com/go/pubsub/v2/pstest"
	// Accept gzip-compressed requests, as the real service does (enableCompression).
	_ "google.golang.org/grpc/encoding/gzip"
)

func main() {
	port := flag.Int("port", 8085, "port to listen on (loopback)")
	flag.Parse()
	srv := pstest.NewServerWithAddress(fmt.Sprintf("127.0.0.1:%d", *port))
	fmt.Printf("pstest listening on %s\n", srv.Addr)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	srv.Close()
}
