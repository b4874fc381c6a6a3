# SPDX-License-Identifier: BSD-3-Clause
# recovery-phases.awk: one CSV row of bench/recovery from a trial's job log
# (every line stamped "EPOCH text" by bench/lib/stamp). Variables: fault,
# path, trial, ok, f (the fault's time), slurm. Phases end at the last
# rank's phase line after the fault; a phase not seen leaves the row ok=0.
$2 == "ddp:" && $3 == "rank" && /the step was ended/ && $1 > f && !detect {
	detect = $1
}
$2 == "ddp:" && $3 == "step" && $4 == "restarted" && $1 > f && !down {
	down = $1
}
$2 == "srun" && $3 == "exit" && $4 != 0 && $1 > f && !down {
	down = $1
}
$2 == "job" && $3 == "start" && $4 != "restart=0" && !again {
	again = $1
}
$2 ~ /^train(\.py)?:$/ && $3 == "time" && $7 > f {
	if ($7 > t[$6])
		t[$6] = $7
}
END {
	if (!detect || !down || !t["start"] || !t["rendezvous"] ||
	    !t["checkpoint"] || !t["first-allreduce"])
		ok = 0
	if (!ok) {
		printf "%s,%s,%s,0,%.6f,,,,,,,,,,%s\n", fault, path, trial, f, slurm
		exit
	}
	printf "%s,%s,%s,1,%.6f,%.3f,%.3f,%.3f,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%s\n",
	    fault, path, trial, f, detect - f, down - detect, t["start"] - down,
	    again ? sprintf("%.3f", again - down) : "",
	    t["rendezvous"] - t["start"], t["checkpoint"] - t["rendezvous"],
	    t["first-allreduce"] - t["checkpoint"], down - f,
	    t["first-allreduce"] - f, slurm
}
