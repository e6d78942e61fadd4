# SPDX-License-Identifier: GPL-2.0
# bash completion for nezhactl(8)

_nezhactl_files()
{
	if declare -F _filedir >/dev/null; then
		_filedir
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}

_nezhactl_rails()
{
	nezhactl rail show 2>/dev/null | sed -nE 's/^[0-9]+: ([^ ]+) .*/\1/p'
}

_nezhactl()
{
	local cur prev words cword
	# bash-completion's helper when it is there; plain bash otherwise.
	if declare -F _init_completion >/dev/null; then
		_init_completion || return
	else
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
		cur=${words[cword]}
		prev=${words[cword - 1]:-}
	fi
	local i obj='' sub='' nwords=0
	local objects='version show rail health param device stats monitor help'

	# Skip the global options (and their arguments) to find the object.
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-n | -netns | -b | -batch) ((i++)) ;;
		-*) ;;
		*)
			if [[ -z $obj ]]; then obj=${words[i]}
			elif [[ -z $sub ]]; then sub=${words[i]}
			fi
			((nwords++))
			;;
		esac
	done
	case $prev in
	-n | -netns)
		COMPREPLY=($(compgen -W "$(ip netns list 2>/dev/null | cut -d' ' -f1)" -- "$cur"))
		return ;;
	-b | -batch)
		_nezhactl_files
		return ;;
	dev | netdev)
		COMPREPLY=($(compgen -W "$(ls /sys/class/net /sys/class/infiniband 2>/dev/null)" -- "$cur"))
		return ;;
	proto)
		COMPREPLY=($(compgen -W 'tcp rdma' -- "$cur"))
		return ;;
	group)
		COMPREPLY=($(compgen -g -- "$cur"))
		return ;;
	owner)
		COMPREPLY=($(compgen -u -- "$cur"))
		return ;;
	-o)
		COMPREPLY=($(compgen -W 'text json prometheus' -- "$cur"))
		return ;;
	esac
	if [[ -z $obj ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W '-j -p -n -b -force -w -h -V' -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$objects" -- "$cur"))
		fi
		return
	fi
	case $obj in
	r*)	# rail
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'show add del set flush help' -- "$cur"))
		elif [[ $nwords == 2 && $sub != a* && $sub != f* ]]; then
			COMPREPLY=($(compgen -W "$(_nezhactl_rails)" -- "$cur"))
		elif [[ $sub == a* && $nwords -ge 3 ]]; then
			COMPREPLY=($(compgen -W 'proto dev netdev ib-port gid-index addr port weight' -- "$cur"))
		elif [[ $sub == se* ]]; then
			COMPREPLY=($(compgen -W 'weight up down' -- "$cur"))
		fi ;;
	he*)	# health
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'show set help' -- "$cur"))
		else
			COMPREPLY=($(compgen -W 'interval misses grace' -- "$cur"))
		fi ;;
	p*)	# param
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'show set help' -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(nezhactl param show 2>/dev/null | cut -d' ' -f1)" -- "$cur"))
		fi ;;
	d*)	# device
		if [[ -z $sub ]]; then
			COMPREPLY=($(compgen -W 'show set apply help' -- "$cur"))
		elif [[ $sub == s* ]]; then
			COMPREPLY=($(compgen -W 'group mode owner' -- "$cur"))
		else
			_nezhactl_files
		fi ;;
	st*)	# stats
		COMPREPLY=($(compgen -W "-o $(_nezhactl_rails)" -- "$cur")) ;;
	m*)	# monitor
		COMPREPLY=($(compgen -W 'count timeout help' -- "$cur")) ;;
	help)
		COMPREPLY=($(compgen -W "$objects" -- "$cur")) ;;
	esac
}
complete -F _nezhactl nezhactl
