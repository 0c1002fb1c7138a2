# Sourced by scripts/setup-emacs and scripts/setup-neovim: a private APT configuration
# with Debian sid as its only source, so that single packages can be fetched from sid
# while the system's own sources stay as they are.
#   sid_apt_init DIR   write DIR/apt.conf (lists, cache and sources under DIR)
#   sid CMD ...        run CMD with APT_CONFIG pointing at it
sid_apt_init() {
  sid_apt_base=$1
  mkdir -p "$sid_apt_base"/etc/sources.list.d "$sid_apt_base"/etc/preferences.d "$sid_apt_base"/lists/partial \
           "$sid_apt_base"/cache/archives/partial "$sid_apt_base"/debs
  echo "deb http://deb.debian.org/debian sid main" > "$sid_apt_base/etc/sources.list"
  cat > "$sid_apt_base/apt.conf" <<CONF
Dir::Etc::SourceList "$sid_apt_base/etc/sources.list";
Dir::Etc::SourceParts "$sid_apt_base/etc/sources.list.d";
Dir::Etc::Preferences "$sid_apt_base/etc/preferences";
Dir::Etc::PreferencesParts "$sid_apt_base/etc/preferences.d";
Dir::State::Lists "$sid_apt_base/lists";
Dir::Cache "$sid_apt_base/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Sandbox::User "root";
CONF
}
sid() { APT_CONFIG="$sid_apt_base/apt.conf" "$@"; }
