#!/usr/bin/env bash
# e2e-cli: install the four agent CLIs, the two ACP agents
# (claude-agent-acp, codex-acp), the official Node OpenAI SDK (the openai
# package) and the ACP client library (@zed-industries/agent-client-protocol)
# at their pinned versions from the npm registry into .cache/cli (skipped
# when they are already there), then run the end-to-end test (./e2e, build
# tag e2e) with the CLIs first on PATH and E2E_CLI_CACHE set to the install
# folder, where TestNodeSDK finds the SDK, TestACPAgents the ACP agents and
# TestACPNodeClient the ACP client library.
#
# Environment: GO (default go), E2E_CLI_CACHE (install folder, default
# .cache/cli), E2E_TIMEOUT (go test -timeout, default 10m), E2E_RUN (go test
# -run, default 'TestCLI|TestNodeSDK|TestACP|TestConsole': every CLI's
# scenarios, the CLIs from the command line, TestCLIGeminiTempHome, which
# sets the test process's HOME inside the system temp dir, so TMPDIR must
# be unset or a world-writable, sticky directory such as /tmp, the SDK
# against the gateway of agentmesh up, the ACP agents as session runs of
# agentmesh up, a Node ACP client against agentmesh acp, and the console
# of agentmesh up's gateway in headless Chromium).
#
# TestConsole drives Debian's Chromium (/usr/bin/chromium) with chromedp;
# when it is missing it is installed with apt-get (as root, or with sudo).
#
# Install scripts are not run (--ignore-scripts): some (node-gyp rebuilds,
# prebuilt-binary fetches) need a compiler or more than the npm registry,
# and the CLIs work without them, with one exception. Claude Code's
# postinstall copies its native binary from the platform package npm
# installed beside it (@anthropic-ai/claude-code-linux-x64) over the
# bin/claude.exe stub, offline; it is run on its own.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
CACHE=${E2E_CLI_CACHE:-.cache/cli}
# Keep in step with the adapters' Version constants (pkg/adapter/cli/claudecode,
# pkg/adapter/cli/codex, pkg/adapter/cli/gemini, pkg/adapter/cli/pi), then
# the Node OpenAI SDK that e2e/testdata/node-sdk/check.mjs imports, then the
# ACP agents of profiles/claude-acp.yaml and profiles/codex-acp.yaml (the
# versions testdata/acp was recorded from) and the ACP client library that
# e2e/testdata/acp-client/check.mjs imports.
PACKAGES=(
	@anthropic-ai/claude-code@2.1.197
	@openai/codex@0.171.0
	@google/gemini-cli@0.61.0
	@mariozechner/pi-coding-agent@0.73.1
	openai@7.59.0
	@zed-industries/claude-agent-acp@0.23.1
	@zed-industries/codex-acp@0.16.0
	@zed-industries/agent-client-protocol@0.4.5
)
BINARIES=(claude codex gemini pi)
# The ACP agents' bins must be there too, but they have no --version: they
# speak ACP on stdin and do not exit on its EOF. codex-acp-linux-x64 is the
# native binary of the platform package (the codex-acp bin is a node
# wrapper that forwards no signal; testdata/acp/README.md).
ACP_BINARIES=(claude-agent-acp codex-acp codex-acp-linux-x64)

die() {
	echo "e2e-cli: $*" >&2
	exit 1
}

command -v node >/dev/null 2>&1 ||
	die "node is not installed; the CLIs need Node.js 20 or later with npm (Debian: apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 ||
	die "npm is not installed; it installs the pinned CLIs from the npm registry (Debian: apt-get install npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old: the CLIs need Node.js 20 or later"

if [ ! -x /usr/bin/chromium ]; then
	command -v apt-get >/dev/null 2>&1 ||
		die "/usr/bin/chromium is missing and there is no apt-get: TestConsole needs Chromium (Debian: apt-get install chromium)"
	sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	echo "e2e-cli: installing Debian's chromium for TestConsole"
	"${sudo[@]}" apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium ||
		die "apt-get install chromium failed (is the Debian mirror reachable?)"
fi
echo "e2e-cli: $(/usr/bin/chromium --version 2>/dev/null | tail -n 1)"

# installed_version PACKAGE prints the version installed in the cache, or nothing.
installed_version() {
	local f="$CACHE/node_modules/$1/package.json"
	[ -f "$f" ] && node -p "require(process.argv[1]).version" "$(cd "$(dirname "$f")" && pwd)/package.json" 2>/dev/null || true
}

stale=()
for spec in "${PACKAGES[@]}"; do
	name=${spec%@*} want=${spec##*@}
	have=$(installed_version "$name")
	[ "$have" = "$want" ] || stale+=("$spec (have ${have:-none})")
done
for b in "${BINARIES[@]}" "${ACP_BINARIES[@]}"; do
	[ -x "$CACHE/node_modules/.bin/$b" ] || stale+=("bin $b")
done

if [ ${#stale[@]} -gt 0 ]; then
	echo "e2e-cli: installing into $CACHE: ${PACKAGES[*]}"
	echo "e2e-cli: (missing or stale: ${stale[*]})"
	mkdir -p "$CACHE"
	if ! npm install --prefix "$CACHE" --no-audit --no-fund --ignore-scripts --loglevel=error "${PACKAGES[@]}"; then
		die "npm install failed (is the npm registry reachable?)"
	fi
	for spec in "${PACKAGES[@]}"; do
		name=${spec%@*} want=${spec##*@}
		have=$(installed_version "$name")
		[ "$have" = "$want" ] || die "$name: installed ${have:-nothing}, want $want"
	done
else
	echo "e2e-cli: pinned CLIs, ACP agents and SDKs already in $CACHE"
fi

BIN="$(cd "$CACHE/node_modules/.bin" && pwd)"
if ! "$BIN/claude" --version >/dev/null 2>&1; then
	echo "e2e-cli: placing Claude Code's native binary (its postinstall)"
	(cd "$CACHE/node_modules/@anthropic-ai/claude-code" && node install.cjs) ||
		die "Claude Code's postinstall (install.cjs) failed: is @anthropic-ai/claude-code-linux-x64 installed?"
fi
for b in "${BINARIES[@]}"; do
	v=$(timeout 60 "$BIN/$b" --version </dev/null 2>&1 | tail -n 1) ||
		die "$BIN/$b --version failed: $v"
	echo "e2e-cli: $b $v"
done
echo "e2e-cli: openai $(installed_version openai) (the Node OpenAI SDK)"
for spec in "${PACKAGES[@]:5}"; do
	name=${spec%@*}
	echo "e2e-cli: $name $(installed_version "$name")"
done
export PATH="$BIN:$PATH"
E2E_CLI_CACHE="$(cd "$CACHE" && pwd)"
export E2E_CLI_CACHE

exec "$GO" test -race -tags e2e -run "${E2E_RUN:-TestCLI|TestNodeSDK|TestACP|TestConsole}" -count=1 -v -timeout "${E2E_TIMEOUT:-10m}" ./e2e
