package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (created with mode 0700)")
	port := fs.Int("port", 0, "secure port of the apiserver on 127.0.0.1")
	withControllers := fs.Bool("controllers", false,
		"also run kube-controller-manager, kube-scheduler and kwok, with --nodes fake nodes, before declaring ready")
	nodes := fs.Int("nodes", 3, "with --controllers: how many kwok nodes to create")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || *port <= 0 {
		fmt.Fprint(os.Stderr, "kube-fixture serve: --dir and --port are required\n", usage)
		return 2
	}
	if *nodes < 0 {
		fmt.Fprint(os.Stderr, "kube-fixture serve: --nodes must not be negative\n", usage)
		return 2
	}
	d, err := filepath.Abs(*dir)
	if err != nil {
		return fail(err)
	}
	kubeconfig := filepath.Join(d, "kubeconfig")

	if err := os.MkdirAll(d, 0o700); err != nil {
		return fail(err)
	}
	// The kubeconfig is the readiness signal for callers, so never leave a stale one around.
	os.Remove(kubeconfig)
	defer os.Remove(kubeconfig)

	logPath := filepath.Join(d, "apiserver.log")
	if err := redirectStderr(logPath); err != nil {
		return fail(err)
	}

	p, err := writePKI(d)
	if err != nil {
		return fail(err)
	}

	// Built first: it installs the SIGTERM/SIGINT handler (only one is allowed per process)
	// and its context also aborts the etcd start below.
	cmd := app.NewAPIServerCommand()
	ctx := cmd.Context()

	etcd, etcdURL, err := startEtcd(ctx, filepath.Join(d, "etcd"))
	if err != nil {
		return fail(fmt.Errorf("etcd: %w (log: %s)", err, logPath))
	}
	defer etcd.Close()

	flags := []string{
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + filepath.Join(d, "serving"),
		"--tls-cert-file=" + filepath.Join(d, "serving", "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(d, "serving", "apiserver.key"),
		"--secure-port=" + strconv.Itoa(*port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// Endpoints may not hold loopback IPs, so reconciling the "kubernetes" Service's
		// endpoints to 127.0.0.1 would fail and log an error every 10s.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(d, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(d, "sa.key"),
		"--client-ca-file=" + filepath.Join(d, "ca.crt"),
		"--authorization-mode=RBAC",
		// No controller-manager creates the "default" ServiceAccounts this plugin waits for.
		"--disable-admission-plugins=ServiceAccount",
	}
	if *withControllers {
		// On SIGTERM the apiserver keeps serving this long while serve stops the controllers,
		// so they do not spend their last moments logging connection errors.
		flags = append(flags, "--shutdown-delay-duration=2s")
	}
	cmd.SetArgs(append(flags, fs.Args()...))

	server := "https://127.0.0.1:" + strconv.Itoa(*port)
	var ctrl *controlPlane
	if *withControllers {
		ctrl = newControlPlane(d, server, p, *nodes)
		// Stops the children as soon as SIGTERM arrives, while the apiserver is still serving.
		defer ctrl.stop()
		go func() {
			<-ctx.Done()
			ctrl.stop()
		}()
	}
	var startupFailed atomic.Bool
	go func() {
		if err := waitReady(ctx, server, p); err != nil {
			return // shutting down before ready
		}
		if ctrl != nil {
			if err := ctrl.start(ctx); err != nil {
				if ctx.Err() != nil {
					return // shutting down
				}
				fmt.Fprintln(origStderr, "kube-fixture serve: controllers:", err)
				fmt.Fprintln(os.Stderr, "kube-fixture serve: controllers:", err)
				startupFailed.Store(true)
				// Shut down like on SIGTERM, through the apiserver's own signal handler.
				unix.Kill(os.Getpid(), unix.SIGTERM) //nolint:errcheck
				return
			}
		}
		if err := writeKubeconfig(kubeconfig, server, p); err != nil {
			fmt.Fprintln(origStderr, "kube-fixture:", err)
			return
		}
		fmt.Fprintf(origStderr, "kube-fixture: ready at %s, KUBECONFIG=%s\n", server, kubeconfig)
	}()

	// RunNoErrOutput rather than Run: the error goes to the caller, not only into the log.
	if err := cli.RunNoErrOutput(cmd); err != nil {
		return fail(fmt.Errorf("kube-apiserver: %w (log: %s)", err, logPath))
	}
	if startupFailed.Load() {
		return 1
	}
	if ctx.Err() == nil {
		return fail(fmt.Errorf("kube-apiserver stopped on its own (log: %s)", logPath))
	}
	return 0
}

// origStderr keeps the caller's stderr for our own few lines once fd 2 points at the log.
var origStderr = os.Stderr

// redirectStderr sends fd 2 to the log file, so klog, etcd's zap logger and Go runtime panics
// from both components all land in one file inside DIR.
func redirectStderr(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	saved, err := unix.Dup(2)
	if err != nil {
		return err
	}
	unix.CloseOnExec(saved)
	origStderr = os.NewFile(uintptr(saved), "stderr")
	return unix.Dup2(int(f.Fd()), 2)
}

func fail(err error) int {
	fmt.Fprintln(origStderr, "kube-fixture serve:", err)
	return 1
}

// startEtcd runs a single-member etcd in this process on free loopback ports.
func startEtcd(ctx context.Context, dir string) (*embed.Etcd, string, error) {
	var lastErr error
	// Free ports are picked then released; another process may grab one in between.
	for attempt := 0; attempt < 3; attempt++ {
		clientURL, peerURL := freeURL(), freeURL()
		cfg := embed.NewConfig()
		cfg.Name = "kube-fixture"
		cfg.Dir = dir
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.UnsafeNoFsync = true // test data; fsync dominates write latency
		cfg.Logger, cfg.LogLevel = "zap", "error"

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if strings.Contains(err.Error(), "address already in use") {
				continue
			}
			return nil, "", err
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, clientURL.String(), nil
		case err := <-e.Err():
			e.Close()
			return nil, "", err
		case <-ctx.Done():
			e.Close()
			return nil, "", ctx.Err()
		case <-time.After(time.Minute):
			e.Close()
			return nil, "", errors.New("not ready after 1m")
		}
	}
	return nil, "", lastErr
}

func freeURL() url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// waitReady polls /readyz as the admin until it answers 200, i.e. etcd connected, informers
// synced and all post-start hooks (RBAC bootstrap roles, system namespaces) done.
func waitReady(ctx context.Context, server string, p *pki) error {
	cert, err := tls.X509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.caCert)
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{cert},
		}},
	}
	for {
		resp, err := client.Get(server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeKubeconfig writes atomically: callers treat the file's existence as "ready".
func writeKubeconfig(path, server string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube-fixture"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caCert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCert, ClientKeyData: p.adminKey}
	cfg.Contexts["kube-fixture"] = &clientcmdapi.Context{Cluster: "kube-fixture", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kube-fixture"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
