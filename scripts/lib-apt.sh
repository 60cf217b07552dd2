# shellcheck shell=sh
# A private apt configuration in a cache directory, with its own lists and
# cache, that fetches Debian source packages and leaves the system's apt
# sources alone. Sourced by scripts/erofs-utils.sh and scripts/fuzz-libs.sh.

# Print the last of the paths "$@" that exist (a glob sorts, so the newest
# version comes last); nothing when none does.
apt_last_of() {
	apt_last=""
	for f in "$@"; do
		[ -e "$f" ] && apt_last=$f
	done
	echo "$apt_last"
}

# apt_private DIR MIRROR SUITE: make DIR the configuration for
# "deb-src MIRROR SUITE main" (sets APT_DIR). Its lists are fetched again
# by the first apt_source of each run.
apt_private() {
	APT_DIR=$1
	mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/archives/partial" \
		"$APT_DIR/src" "$APT_DIR/empty-parts" "$APT_DIR/cache"
	echo "deb-src $2 $3 main" > "$APT_DIR/sources.list"
	cat > "$APT_DIR/apt.conf" <<CONF
Dir::Etc::SourceList "$APT_DIR/sources.list";
Dir::Etc::SourceParts "$APT_DIR/empty-parts";
Dir::State::Lists "$APT_DIR/lists";
Dir::Cache "$APT_DIR/cache";
Dir::Cache::archives "$APT_DIR/archives";
APT::Sandbox::User "root";
CONF
	# a file, not a variable: apt_source runs in command substitutions
	rm -f "$APT_DIR/updated"
}

# apt_source PKG: download source package PKG into $APT_DIR/src, replacing
# an earlier download and unpacked trees named PKG-*; prints its .dsc.
apt_source() {
	if [ ! -e "$APT_DIR/updated" ]; then
		APT_CONFIG=$APT_DIR/apt.conf apt-get update -qq \
			-o Debug::NoLocking=1 >&2
		: > "$APT_DIR/updated"
	fi
	(
		cd "$APT_DIR/src" || exit 1
		rm -rf "$1"-*/ "$1"_*
		APT_CONFIG=$APT_DIR/apt.conf apt-get source -qq \
			--download-only -o Debug::NoLocking=1 "$1"
	) >&2 || return 1
	apt_dsc=$(apt_last_of "$APT_DIR/src/$1"_*.dsc)
	if [ -z "$apt_dsc" ]; then
		echo "$0: no source package for $1" >&2
		return 1
	fi
	echo "$apt_dsc"
}
