#!/bin/bash
PBS -l walltime=00:04:00,nodes=2:ppn=2,mem=1GB
# gridsched corpus: replaced module load torque
echo module load torque
echo started
pwd
# the work would go here
