// kube-fixture is one binary holding a real kube-apiserver (with embedded etcd),
// kube-controller-manager, kube-scheduler and kubectl, built from a single pinned Kubernetes
// release. See README.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as in upstream kube-apiserver

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl auth plugins, as in upstream kubectl
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // same metrics as upstream kube-apiserver
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage:
  kube-fixture serve --dir DIR --port PORT [--controllers [--nodes N]] [-- EXTRA-KUBE-APISERVER-FLAGS...]
  kube-fixture controller-manager ARGS...   (kube-controller-manager; serve --controllers runs it)
  kube-fixture scheduler ARGS...            (kube-scheduler; serve --controllers runs it)
  kube-fixture kubectl ARGS...     (or run through a symlink named kubectl)
  kube-fixture version
`

func main() {
	// Busybox style: a symlink named kubectl behaves like kubectl.
	cmd, args := filepath.Base(os.Args[0]), os.Args[1:]
	if cmd != "kubectl" {
		if len(args) == 0 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		cmd, args = args[0], args[1:]
	}

	switch cmd {
	case "serve":
		os.Exit(serve(args))
	case "kubectl":
		os.Exit(kubectl(args))
	// Each component installs its own SIGTERM handler (allowed once per process), so they run
	// as separate processes: serve --controllers starts them as its children.
	case "controller-manager":
		os.Exit(component(controllermanager.NewControllerManagerCommand(), args))
	case "scheduler":
		os.Exit(component(scheduler.NewSchedulerCommand(), args))
	case "version":
		fmt.Println(version.Get().GitVersion)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kube-fixture: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
}

// component runs a Kubernetes component command as its upstream main does
// (k8s.io/kubernetes/cmd/kube-{controller-manager,scheduler}/*.go).
func component(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// kubectl mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go. kubectl reads os.Args itself
// (plugins, verbosity), so it has to look like a plain kubectl invocation.
func kubectl(args []string) int {
	os.Args = append([]string{"kubectl"}, args...)
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err) // prints the error and exits non-zero
	}
	return 0
}
