// Command pause holds a pod's namespaces for the local plane's real node: it sleeps until
// SIGTERM or SIGINT, then exits 0 (the role of the Kubernetes pause image, built here so the
// node's runtime needs no registry).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
