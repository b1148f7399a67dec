#$ -l gpu=true
#$ -l h_rt=0:30:0
#$ -l tmem=2G
#$ -N unet
#$ -wd /tmp
#$ -S /bin/bash
#!/bin/bash
# gridsched corpus: replaced source /share/apps/source_files/python/python-3.7.2.source
echo source python
# gridsched corpus: replaced python3.7 train.py
echo train
