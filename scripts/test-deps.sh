#!/usr/bin/env bash
# test-deps.sh: install what `make test` needs when it is missing, so that on
# a fresh machine the README's test command is all a newcomer runs:
#   - the pinned npm packages of testdata/npm (upstream MCP servers, the MCP
#     Inspector, the conformance suites, Node 22 for the latter, playwright-core),
#     with `npm ci` only when package-lock.json changed since the last install;
#   - the PostgreSQL 15 server binaries (initdb, pg_ctl: the store's suite runs
#     a throwaway server of its own; no cluster of the package's is created);
#   - Chromium (the dashboard's browser test).
# System packages come from apt-get (as root, or through sudo); elsewhere the
# script says what to install and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || need_apt+=(postgresql)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
	sudo=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo="sudo"
		else
			echo "test-deps: missing ${need_apt[*]}; install them as root (apt-get install postgresql-15 chromium)" >&2
			exit 1
		fi
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "test-deps: missing ${need_apt[*]} and no apt-get here: install the PostgreSQL 15 server binaries (/usr/lib/postgresql/15/bin) and Chromium (/usr/bin/chromium)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [[ " ${need_apt[*]} " == *" postgresql "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
		# Only the binaries: no cluster of the package's own, started and
		# left running.
		$sudo mkdir -p /etc/postgresql-common
		echo 'create_main_cluster = false' | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
	fi
	echo "test-deps: installing ${need_apt[*]}" >&2
	$sudo apt-get update -q
	pkgs=()
	for p in "${need_apt[@]}"; do
		if [ "$p" = postgresql ]; then
			if apt-cache show postgresql-15 >/dev/null 2>&1; then pkgs+=(postgresql-15); else pkgs+=(postgresql); fi
		else
			pkgs+=("$p")
		fi
	done
	$sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"
fi

# npm ci wipes node_modules and takes most of a minute: only when the lock
# file changed since the last successful install.
lock=testdata/npm/package-lock.json
stamp=testdata/npm/node_modules/.switchboard-lock.sha256
sum=$(sha256sum "$lock" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
	echo "test-deps: npm ci in testdata/npm" >&2
	(cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error)
	echo "$sum" >"$stamp"
fi
