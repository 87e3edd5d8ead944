#!/usr/bin/env bash
# VS Code for the desktop: code-server (VS Code's own code, served to a Chromium app window, see
# envs/desktop/compat/bin/code) from npm, into /usr/lib/computerrl/code-server, where a desktop's sandbox (it
# sees /usr) runs it. Idempotent. Run as root by install.sh and envs/fleet/Dockerfile.
# Its own install script would download ripgrep from GitHub: its steps are run here instead, with
# Debian's ripgrep. Needs Node.js 20 (what code-server 4.100 is built for), npm, g++, make and the
# headers of libkrb5-dev, libxkbfile-dev and libsecret-1-dev for its native modules.
set -euo pipefail
VERSION=4.100.3  # VS Code 1.100
DEST=${1:-/usr/lib/computerrl/code-server}
[ "$(cat "$DEST/.version" 2>/dev/null)" = "$VERSION" ] && exit 0

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo none)
if [ "$node_major" != 20 ]; then  # exit code 2: install.sh goes on without VS Code
  echo "install_code_server.sh: code-server $VERSION needs Node.js 20, this machine has: $node_major" >&2
  exit 2
fi
mkdir -p "$(dirname "$DEST")"
tmp=$(mktemp -d "$DEST.partial.XXXX")  # beside DEST: moved into place whole, or not at all
trap 'rm -rf "$tmp"' EXIT
export npm_config_yes=true npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
npm install --prefix "$tmp" --ignore-scripts --no-save --loglevel=error "code-server@$VERSION"
(cd "$tmp" && npm rebuild --loglevel=error argon2)
vs="$tmp/node_modules/code-server/lib/vscode"
(cd "$vs" && npm install --omit=dev --ignore-scripts --loglevel=error \
  && npm rebuild --loglevel=error @parcel/watcher @vscode/spdlog kerberos native-watchdog node-pty @vscode/deviceid)
(cd "$vs/extensions" && npm install --omit=dev --ignore-scripts --loglevel=error)
mkdir -p "$vs/node_modules/@vscode/ripgrep/bin"
ln -sfn /usr/bin/rg "$vs/node_modules/@vscode/ripgrep/bin/rg"
ln -sfn node_modules "$vs/node_modules.asar"
ln -sfn code-linux.sh "$vs/bin/remote-cli/code-server"
ln -sfn browser-linux.sh "$vs/bin/helpers/browser.sh"
# Its windows are titled as VS Code's ("file - folder - Visual Studio Code"): OSWorld's tasks wait for it.
workbench="$vs/out/vs/code/browser/workbench/workbench.js"
sed -i 's/nameShort:"code-server",nameLong:"code-server"/nameShort:"Visual Studio Code",nameLong:"Visual Studio Code"/' \
  "$workbench"
grep -q 'nameShort:"Visual Studio Code"' "$workbench" \
  || { echo "install_code_server.sh: code-server's product name not found in $workbench" >&2; exit 1; }
echo "$VERSION" > "$tmp/.version"
chmod -R a+rX "$tmp"
rm -rf "$DEST"
mv "$tmp" "$DEST"
trap - EXIT
echo "install_code_server.sh: code-server $VERSION in $DEST"
