package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the PEM files written into DIR; the kubeconfig embeds some of them.
type pki struct {
	caCert, adminCert, adminKey []byte
}

// writePKI generates a fresh CA, the apiserver serving cert, the admin client cert and the
// service-account key. Serving cert is ours (not the apiserver's self-signed one) so that
// the kubeconfig can carry a real CA instead of insecure-skip-tls-verify.
func writePKI(dir string) (*pki, error) {
	caKey, caCertDER, err := newCert(nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kube-fixture-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caCertDER)

	servingKey, servingDER, err := newCert(caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		// 10.0.0.1 is the in-cluster "kubernetes" service IP for --service-cluster-ip-range.
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
	})
	if err != nil {
		return nil, err
	}

	adminKey, adminDER, err := newCert(caCert, caKey, &x509.Certificate{
		// system:masters bypasses RBAC, like a kubeadm admin.conf.
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	// Service-account tokens are RS256 by default, so this key must be RSA.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}

	p := &pki{
		caCert:    pemBlock("CERTIFICATE", caCertDER),
		adminCert: pemBlock("CERTIFICATE", adminDER),
		adminKey:  keyPEM(adminKey),
	}
	files := map[string][]byte{
		"ca.crt":                p.caCert,
		"ca.key":                keyPEM(caKey),
		"serving/apiserver.crt": pemBlock("CERTIFICATE", servingDER),
		"serving/apiserver.key": keyPEM(servingKey),
		"admin.crt":             p.adminCert,
		"admin.key":             p.adminKey,
		"sa.key":                keyPEM(saKey),
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newCert makes an ECDSA P-256 key and a certificate for it, self-signed when parent is nil.
func newCert(parent *x509.Certificate, parentKey crypto.Signer, tmpl *x509.Certificate) (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour) // tolerate small clock skew
	tmpl.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	return key, der, err
}

func keyPEM(key crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // only fails for unsupported key types
	}
	return pemBlock("PRIVATE KEY", der)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
