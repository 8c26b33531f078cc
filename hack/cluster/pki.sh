# PKI and kubeconfigs of the local cluster (sourced by up.sh). One CA signs every serving and
# client certificate; Kubernetes takes the user from CN and the groups from O. etcd has no TLS:
# it listens on loopback only and only the API server talks to it.
# shellcheck shell=bash

# cert NAME CN [O] [SANS]: a key and a CA-signed certificate, kept when it already exists so a
# second up.sh does not invalidate kubeconfigs that are in use.
cert() {
  local name="$1" cn="$2" org="${3:-}" sans="${4:-}" subj ext
  [ -f "$PKI/$name.crt" ] && return 0
  subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  ext="$PKI/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
    -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

# kubeconfig NAME: for the client certificate NAME, talking to the API server on the node IP.
kubeconfig() {
  local name="$1" out="${2:-$PKI/$1.kubeconfig}"
  cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $NET_NAME
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: $NET_NAME
  context: {cluster: $NET_NAME, user: $name}
current-context: $NET_NAME
EOF
  chmod 600 "$out"
}

make_pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -subj "/CN=kube-fstack-cluster-ca" \
      -days 365 -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$PKI/ca.crt" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" \
    "IP:$NODE_IP,IP:$SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin kubernetes-admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving "system:node:$NODE_NAME" system:nodes "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE_NAME"
  cert kube-proxy system:kube-proxy
  if [ ! -f "$PKI/sa.key" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  local k
  for k in controller-manager scheduler kubelet kube-proxy; do kubeconfig "$k"; done
  kubeconfig admin "$KUBECONFIG_ADMIN"
}
