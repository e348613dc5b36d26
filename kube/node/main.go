// Command kube-node is Kubernetes' own kubelet, kube-controller-manager and kube-scheduler,
// unchanged, in one binary (as hyperkube was): the one-Node cluster the DaemonSet test runs
// (tests/integration/kube_node.py) starts each from it.  Which one runs is the name it is called
// by (build/kube/kubelet, ... are links to it) or, failing that, its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name, os.Args = os.Args[1], os.Args[1:]
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube-node kubelet|kube-controller-manager|kube-scheduler [FLAGS]")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
