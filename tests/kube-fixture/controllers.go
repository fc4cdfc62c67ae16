package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The kwok Stages (see stages/ and README.md), written to DIR/kwok-stages.yaml on start.
//
//go:embed stages/*.yaml
var stagesFS embed.FS

const (
	// kwok manages exactly the Nodes with this annotation (also those a test creates itself).
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	// How long the children get to start and the fake nodes to become Ready and untainted.
	nodesReadyTimeout = 2 * time.Minute
	// How long a child may take to exit on SIGTERM before it is killed.
	childStopTimeout = 10 * time.Second
)

// controlPlane runs kube-controller-manager, kube-scheduler (both this binary) and kwok as
// child processes of serve, and creates the fake nodes.
type controlPlane struct {
	dir, server string
	p           *pki
	nodes       int
	spawn       chan spawnRequest

	mu       sync.Mutex
	children []*child
	stopping bool
	stopOnce sync.Once
}

type child struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{} // closed once the process has been waited for
	err       error         // its exit status, valid after done
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func newControlPlane(dir, server string, p *pki, nodes int) *controlPlane {
	c := &controlPlane{dir: dir, server: server, p: p, nodes: nodes, spawn: make(chan spawnRequest)}
	go c.spawner()
	return c
}

// spawner starts every child from one OS thread that lives as long as the process: Pdeathsig
// fires when the *thread* that forked the child exits, and the Go runtime may retire others.
func (c *controlPlane) spawner() {
	runtime.LockOSThread() // never unlocked: the goroutine, and so the thread, never ends
	for r := range c.spawn {
		r.errc <- r.cmd.Start()
	}
}

// start launches the three children, creates the fake nodes and waits until they are Ready
// and schedulable.
func (c *controlPlane) start(ctx context.Context) error {
	adminKubeconfig := filepath.Join(c.dir, "admin.kubeconfig")
	// Not DIR/kubeconfig: that one is the readiness signal, written after the nodes are Ready.
	if err := writeKubeconfig(adminKubeconfig, c.server, c.p); err != nil {
		return err
	}
	stages := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := writeStages(stages); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kwok := filepath.Join(filepath.Dir(self), "kwok")
	if _, err := os.Stat(kwok); err != nil {
		return fmt.Errorf("kwok not found beside %s (bash tests/kube-fixture/build.sh builds both): %w", self, err)
	}

	err = c.launch("controller-manager", self, []string{
		"controller-manager",
		"--kubeconfig=" + adminKubeconfig,
		"--leader-elect=false",
		// No serving endpoint (healthz/metrics) at all: nothing to bind, nothing to collide.
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		// The csrsigning controller signs approved CSRs with the fixture's CA.
		"--cluster-signing-cert-file=" + filepath.Join(c.dir, "ca.crt"),
		"--cluster-signing-key-file=" + filepath.Join(c.dir, "ca.key"),
		"--root-ca-file=" + filepath.Join(c.dir, "ca.crt"),
		"--service-account-private-key-file=" + filepath.Join(c.dir, "sa.key"),
		"--use-service-account-credentials=false",
		"--controllers=*",
		// Faster discovery and informer start than the default 20 QPS.
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	}, nil)
	if err != nil {
		return err
	}
	err = c.launch("scheduler", self, []string{
		"scheduler",
		"--kubeconfig=" + adminKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
	}, nil)
	if err != nil {
		return err
	}
	err = c.launch("kwok", kwok, []string{
		"--kubeconfig=" + adminKubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
		// Node heartbeats through Leases (node-heartbeat-with-lease.yaml relies on it).
		"--node-lease-duration-seconds=40",
		// Pod IPs away from the service range (10.0.0.0/24).
		"--cidr=10.244.0.0/16",
	}, []string{
		// kwok also reads ~/.kwok/kwok.yaml if it exists; keep it to this fixture's files.
		"KWOK_WORKDIR=" + filepath.Join(c.dir, "kwok"),
	})
	if err != nil {
		return err
	}

	client, err := clientFor(adminKubeconfig)
	if err != nil {
		return err
	}
	names, err := c.createNodes(ctx, client)
	if err != nil {
		return err
	}
	return c.waitNodesReady(ctx, client, names)
}

func writeStages(path string) error {
	files, err := fs.Glob(stagesFS, "stages/*.yaml")
	if err != nil {
		return err
	}
	sort.Strings(files)
	var all []byte
	for _, f := range files {
		data, err := stagesFS.ReadFile(f)
		if err != nil {
			return err
		}
		all = append(all, "---\n# "+f+"\n"...)
		all = append(all, data...)
	}
	return os.WriteFile(path, all, 0o600)
}

// launch starts one child with its output in DIR/NAME.log. A child that exits while serve is
// not stopping is reported in the apiserver log and on serve's stderr.
func (c *controlPlane) launch(name, path string, args, env []string) error {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return errors.New("stopping")
	}
	errc := make(chan error, 1)
	c.spawn <- spawnRequest{cmd: cmd, errc: errc}
	if err := <-errc; err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	ch := &child{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	c.children = append(c.children, ch)
	go func() {
		ch.err = cmd.Wait()
		if ch.err == nil {
			ch.err = errors.New("exit status 0")
		}
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if !stopping {
			msg := fmt.Sprintf("kube-fixture serve: %s (pid %d) exited unexpectedly: %v (log: %s)",
				name, cmd.Process.Pid, ch.err, logPath)
			fmt.Fprintln(os.Stderr, msg) // apiserver.log
			fmt.Fprintln(origStderr, msg)
		}
		close(ch.done)
	}()
	return nil
}

// deadChild returns an error naming the first child that has exited, if any.
func (c *controlPlane) deadChild() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.children {
		select {
		case <-ch.done:
			return fmt.Errorf("%s exited: %v (log: %s)", ch.name, ch.err, ch.log)
		default:
		}
	}
	return nil
}

// stop sends SIGTERM to every child and waits for them (SIGKILL after childStopTimeout).
// Safe to call more than once; later callers wait for the first to finish.
func (c *controlPlane) stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopping = true
		children := c.children
		c.mu.Unlock()
		for _, ch := range children {
			ch.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // may have exited already
		}
		deadline := time.After(childStopTimeout)
		for _, ch := range children {
			select {
			case <-ch.done:
			case <-deadline:
				for _, k := range children {
					k.cmd.Process.Kill() //nolint:errcheck
				}
				<-ch.done
			}
		}
	})
}

func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// createNodes creates kwok-node-0..N-1, which kwok picks up through the annotation.
func (c *controlPlane) createNodes(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	names := make([]string, 0, c.nodes)
	for i := 0; i < c.nodes; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					"type":                   "kwok",
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
				},
				Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue},
			},
			Status: corev1.NodeStatus{
				Allocatable: res,
				Capacity:    res,
				// Pods' hostIP comes from here (kwok's pod stages); kwok's own --node-ip
				// would give every node the same address.
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)},
					{Type: corev1.NodeHostName, Address: name},
				},
			},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating node %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// waitNodesReady waits until every node is Ready (kwok's node-initialize stage) and carries no
// node.kubernetes.io/* taint (the admission plugin TaintNodesByCondition adds not-ready on
// create; the node-lifecycle controller removes it once the node is Ready), so that a pod
// created right after the kubeconfig appears is schedulable.
func (c *controlPlane) waitNodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	deadline := time.Now().Add(nodesReadyTimeout)
	var pending []string
	for {
		if err := c.deadChild(); err != nil {
			return err
		}
		pending = pending[:0]
		for _, name := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeSchedulable(node) {
				pending = append(pending, name)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes not Ready and untainted after %v: %s (logs: %s)",
				nodesReadyTimeout, strings.Join(pending, ", "), c.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeSchedulable(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
