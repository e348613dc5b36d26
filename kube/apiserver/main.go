// Command kube-apiserver is Kubernetes' own API server, unchanged: sfclab's tests start it
// against a private etcd to have a real API server (tests/integration/kube.py).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
