// kube-fixture is one binary holding a real kube-apiserver (with embedded etcd) and
// kubectl, built from a single pinned Kubernetes release. See README.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as in upstream kube-apiserver

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl auth plugins, as in upstream kubectl
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // same metrics as upstream kube-apiserver
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

const usage = `usage:
  kube-fixture serve --dir DIR --port PORT [-- EXTRA-KUBE-APISERVER-FLAGS...]
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
	case "version":
		fmt.Println(version.Get().GitVersion)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kube-fixture: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
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
