#!/usr/bin/env bash
# The main job until the local cluster exists: render every sample StackInstance with
# kubectl-fstack, as the dataplane would for a pod on CPUs 2.. with the app on the next CPU, and
# inject the sample workload offline as the operator's webhook would.
set -euo pipefail
cd "$(dirname "$0")/.."
out=_output/render
mkdir -p "$out"
for f in config/samples/*.yaml; do
  name=$(basename "$f" .yaml)
  procs=$(awk '/^  processes:/ {print $2}' "$f"); procs=${procs:-1}
  cpus="2-$((1 + procs))"; app=$((2 + procs))
  bin/kubectl-fstack render -f "$f" --cpus "$cpus" --app-cpus "$app" --eal >"$out/$name.ini" 2>"$out/$name.notes"
  printf '%-12s processes=%s cpus=%-5s -> %s (%s lines)\n' "$name" "$procs" "$cpus" "$out/$name.ini" "$(wc -l <"$out/$name.ini")"
done
mkdir -p _output/inject
bin/kubectl-fstack inject -f config/samples/workloads/nginx-vhost.yaml --stack config/samples/vhost-user.yaml >_output/inject/nginx-vhost.yaml
printf '%-12s the sample Deployment with the dataplane injected -> _output/inject/nginx-vhost.yaml\n' "inject"
# The quickstart's stack takes each pod's address from a pool: offline, a preview with the pool's
# first address (its warning goes to the .notes file).
bin/kubectl-fstack inject -f config/samples/quickstart/nginx.yaml --stack config/samples/quickstart/stack.yaml \
  >_output/inject/quickstart.yaml 2>_output/inject/quickstart.notes
printf '%-12s the quickstart Deployment, a preview with the pool'"'"'s first address -> _output/inject/quickstart.yaml\n' "inject"
echo
echo "config.ini and EAL argv (as '# eal' lines) are in $out/; for example:"
echo "  cat $out/vhost-user.ini"
echo "Render your own: bin/kubectl-fstack render -f stack.yaml --cpus 8-11 --app-cpus 12 --eal"
