#!/usr/bin/env bash
# Checks that every #include "..." (and <folder/...>) under src/ points down the ladder: a file in
# src/<folder>/ may include its own folder's headers and those of the folders before <folder> in
# src/LAYERS (the one list of the order; CMakeLists.txt reads it too and checks the libraries'
# links). A backend's folder (kernels/cpu/, kernels/<device>/) is private to kernels/: no other
# folder may include from it; they use kernels/backend.h and kernels/backend_registry.h. Prints one
# line per offence and exits 1 if there is any; the exceptions listed below are
# printed as tolerated.
#   scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Known upward includes, each "file included-header", tolerated until the code that has them is
# rewritten. Delete an entry when its include goes; an entry that matches nothing fails the check.
tolerated=()

declare -A rank
order=""
n=0
while IFS= read -r line; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [ -z "$line" ] && continue
  rank[$line]=$n
  order+="${order:+ -> }$line"
  n=$((n + 1))
done <src/LAYERS

declare -A used
offences=0
tolerated_count=0
files=0
includes=0

for dir in src/*/; do
  folder=$(basename "$dir")
  if [ -z "${rank[$folder]+x}" ]; then
    echo "src/$folder/ is not listed in src/LAYERS"
    offences=$((offences + 1))
  fi
done

while IFS= read -r -d '' file; do
  files=$((files + 1))
  rel=${file#src/}
  folder=${rel%%/*}
  if [ "$folder" = "$rel" ]; then
    echo "$file is not in a folder of src/ (src/LAYERS lists the folders)"
    offences=$((offences + 1))
    continue
  fi
  [ -z "${rank[$folder]+x}" ] && continue  # reported above
  while IFS= read -r hit; do
    lineno=${hit%%:*}
    text=${hit#*:}
    if [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
      header=${BASH_REMATCH[1]}
      # A quoted include is looked up beside the including file first, then in src/.
      target=$header
      if [ -e "$(dirname "$file")/$header" ]; then
        target=$(realpath -m --relative-to=src "$(dirname "$file")/$header")
      fi
      [[ $target == */* ]] || target=$folder/$target
    elif [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+/[^\>]+)\> ]]; then
      header=${BASH_REMATCH[1]}  # <engine/engine.h> finds src/ too; <sys/mman.h> is skipped below
      target=$header
    else
      continue
    fi
    to=${target%%/*}
    [ -n "${rank[$to]+x}" ] || [ -d "src/$to" ] || continue  # a system or package header
    includes=$((includes + 1))
    rest=${target#*/}
    if [ "$to" = kernels ] && [ "$folder" != kernels ] && [[ $rest == */* ]]; then
      verdict="a backend's own header (kernels/${rest%%/*}/ is private to kernels/)"
    elif [ -z "${rank[$to]+x}" ]; then
      verdict="which is in src/$to/, not listed in src/LAYERS"
    elif [ "${rank[$to]}" -gt "${rank[$folder]}" ]; then
      verdict="which is above '$folder'"
    else
      continue
    fi
    key="$file $header"
    is_tolerated=0
    for entry in "${tolerated[@]}"; do
      if [ "$entry" = "$key" ]; then is_tolerated=1; fi
    done
    if [ $is_tolerated = 1 ]; then
      used[$key]=1
      tolerated_count=$((tolerated_count + 1))
      echo "tolerated: $file:$lineno includes '$header', $verdict"
    else
      offences=$((offences + 1))
      echo "$file:$lineno includes '$header', $verdict"
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file" || true)
done < <(find src -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cpp' \
  -o -name '*.inc' \) -print0 | sort -z)

for entry in "${tolerated[@]}"; do
  if [ -z "${used[$entry]+x}" ]; then
    offences=$((offences + 1))
    echo "stale exception in scripts/check-layers.sh: ${entry% *} no longer includes" \
      "'${entry#* }' up the ladder; delete the entry"
  fi
done

if [ $offences -gt 0 ]; then
  echo "check-layers: FAILED, $offences offence(s), $tolerated_count tolerated, in $includes" \
    "includes of $files files (order in src/LAYERS: $order)"
  exit 1
fi
echo "check-layers: OK, none of the $includes includes in $files files points up the ladder" \
  "($tolerated_count tolerated; order in src/LAYERS: $order)"
