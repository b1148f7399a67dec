#!/bin/bash
#PBS -l nodes=1:ppn=4
#PBS -l mem=2gb
#PBS -l vmem=4gb
#PBS -l walltime=3:00:00
echo "mem wins over vmem"
