#!/bin/bash
#$ -cwd
#$ -pe smp x
echo "never submitted"
