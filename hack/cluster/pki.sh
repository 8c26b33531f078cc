# PKI and kubeconfigs of the local cluster (sourced by up.sh). One CA signs every serving and
# client certificate; Kubernetes takes the user from CN and the groups from O. etcd has no TLS:
# it listens on loopback only and only the API server talks to it.
# shellcheck shell=bash

# cert NAME CN [O] [SANS] [CA]: a key and a certificate signed by CA (default ca), kept when it
# already exists so a second up.sh does not invalidate kubeconfigs that are in use.
cert() {
  local name="$1" cn="$2" org="${3:-}" sans="${4:-}" ca="${5:-ca}" subj ext
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
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
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

# ca NAME CN: a self-signed CA, kept when it exists.
ca() {
  [ -f "$PKI/$1.crt" ] && return 0
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "/CN=$2" \
    -days 365 -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$PKI/$1.crt" 2>/dev/null
}

# webhook_client: the client certificate kube-apiserver presents to kube-fstack's webhooks,
# under a CA of its own (the chart's webhook.clientCA), so the operator answers the API server
# only: the cluster CA would also let every kubelet and admin certificate in. The admission
# configuration gives it for every webhook Service in the release namespace.
webhook_client() {
  ca webhook-client-ca kube-fstack-webhook-client-ca
  cert apiserver-webhook-client kube-apiserver-webhook-client "" "" webhook-client-ca
  cat >"$PKI/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: "*.${RELEASE_NAMESPACE:-kube-fstack-system}.svc"
  user:
    client-certificate: $PKI/apiserver-webhook-client.crt
    client-key: $PKI/apiserver-webhook-client.key
EOF
  local plugin
  {
    echo "apiVersion: apiserver.config.k8s.io/v1"
    echo "kind: AdmissionConfiguration"
    echo "plugins:"
    for plugin in ValidatingAdmissionWebhook MutatingAdmissionWebhook; do
      echo "- name: $plugin"
      echo "  configuration:"
      echo "    apiVersion: apiserver.config.k8s.io/v1"
      echo "    kind: WebhookAdmissionConfiguration"
      echo "    kubeConfigFile: $PKI/webhook-client.kubeconfig"
    done
  } >"$PKI/admission.yaml"
}

make_pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  ca ca kube-fstack-cluster-ca
  cert apiserver kube-apiserver "" \
    "IP:$NODE_IP,IP:$SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin kubernetes-admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving "system:node:$NODE_NAME" system:nodes "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE_NAME"
  cert kube-proxy system:kube-proxy
  webhook_client
  if [ ! -f "$PKI/sa.key" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  local k
  for k in controller-manager scheduler kubelet kube-proxy; do kubeconfig "$k"; done
  kubeconfig admin "$KUBECONFIG_ADMIN"
}
